//go:build !admittest

package atomic_test

import "github.com/admit-go/admit/internal/conformance"

// hooks gives the conformance suite its view of New's store. In a normal
// build the table (internal/table) has no pause point nor eviction hook, so
// neither is set, and the checks that need them skip; builds with the tag
// admittest (make test) set both (hooks_on_test.go).
var hooks = &conformance.StoreHooks{}
