package admit

import (
	"errors"

	"github.com/admit-go/admit/internal/plumb"
)

var (
	// ErrInvalidRule is wrapped by every error about a rule: unparsable text,
	// a field out of range, limits whose arithmetic would overflow. The wrapping
	// error names the field and says what would be accepted.
	ErrInvalidRule = errors.New("admit: invalid rule")

	// ErrUnsupported is wrapped by the error a variant returns for an algorithm
	// (or an option) it does not implement; the message names the variant that does.
	ErrUnsupported = plumb.ErrUnsupported

	// ErrInvalidOption is wrapped by the error returned for a bad [Option], such
	// as WithClock(nil).
	ErrInvalidOption = plumb.ErrInvalidOption
)
