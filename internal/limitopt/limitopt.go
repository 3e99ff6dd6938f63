// Package limitopt holds what httplimit and grpclimit have in common: the
// fields their options resolve ([Common]), the checks of the options both
// offer, with errors that name the package ([Pkg]), the parts a key is
// built from ([Part]) and their joining ([JoinKey]), and the decision of a
// keyed request with its quota and its observation ([Decider]). Each
// package keeps its own Option and KeyPart types and documents them for
// its users.
package limitopt

import (
	"fmt"
	"strings"

	"github.com/admit-go/admit"
	"github.com/admit-go/admit/internal/clientip"
	"github.com/admit-go/admit/internal/ratehdr"
	"github.com/admit-go/admit/observe"
)

// Pkg is the name of the package whose options are checked, "httplimit" or
// "grpclimit", which starts each of their errors.
type Pkg string

// Invalid returns an error of the package wrapping [admit.ErrInvalidOption]:
// "httplimit: invalid option: " and the message.
func (p Pkg) Invalid(format string, args ...any) error {
	return fmt.Errorf(string(p)+": %w: "+format, append([]any{admit.ErrInvalidOption}, args...)...)
}

// Common is the part of a package's resolved options that both packages
// share, over the package's KeyFunc K and KeyPart P; each package's config
// embeds it.
type Common[K any, P comparable] struct {
	KeyOpt     string // the option that set the key, for conflict errors; "" for the default
	Key        K      // WithKey's function
	Parts      []P    // WithKeyFrom's parts
	Proxies    *clientip.Proxies
	UnknownKey string
	PolicyOpt  string // the option that named the quota, for conflict errors
	PolicyName string
	PolicyRule *admit.Rule
	Observer   observe.Observer
}

// SetKey is WithKey: it sets the key's function to f, or, when f is nil,
// returns the error msg instead.
func (c *Common[K, P]) SetKey(p Pkg, f K, isNil bool, msg string) error {
	if isNil {
		return p.Invalid("%s", msg)
	}
	if err := c.keyBy(p, "WithKey"); err != nil {
		return err
	}
	c.Key = f
	return nil
}

// SetParts is WithKeyFrom: it sets the key's parts to a copy of parts, or
// returns an error for the first part that is wrong: the zero part (zero
// says how to build good ones), or one whose name badName finds wrong
// (badName says what is wrong, or returns ""). none is the error when there
// are no parts.
func (c *Common[K, P]) SetParts(p Pkg, parts []P, none, zero string, badName func(P) string) error {
	if len(parts) == 0 {
		return p.Invalid("%s", none)
	}
	var zeroPart P
	for i, part := range parts {
		if part == zeroPart {
			return p.Invalid("WithKeyFrom: part %d is the zero KeyPart; %s", i, zero)
		}
		if msg := badName(part); msg != "" {
			return p.Invalid("%s", msg)
		}
	}
	if err := c.keyBy(p, "WithKeyFrom"); err != nil {
		return err
	}
	c.Parts = append([]P(nil), parts...)
	return nil
}

// keyBy records that the option opt sets the key, which only one option may.
func (c *Common[K, P]) keyBy(p Pkg, opt string) error {
	if c.KeyOpt != "" {
		return p.Invalid("%s and %s both set the key; pass one", c.KeyOpt, opt)
	}
	c.KeyOpt = opt
	return nil
}

// Set is an option that sets *field to v, whose argument must be given:
// when v is nil, it returns the error msg instead.
func Set[T any](p Pkg, field *T, v T, isNil bool, msg string) error {
	if isNil {
		return p.Invalid("%s", msg)
	}
	*field = v
	return nil
}

// TrustProxies is WithTrustedProxies: it adds networks to the proxies c
// trusts to write header.
func (c *Common[K, P]) TrustProxies(p Pkg, header clientip.Header, networks []string) error {
	t, err := clientip.Trust(c.Proxies, header, networks)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", p, admit.ErrInvalidOption, err)
	}
	c.Proxies = t
	return nil
}

// SetUnknownKey is WithUnknownKey: key must be 1 to maxKeyBytes bytes.
func (c *Common[K, P]) SetUnknownKey(p Pkg, key string, maxKeyBytes int) error {
	if key == "" || len(key) > maxKeyBytes {
		return p.Invalid("WithUnknownKey(%s): want a non-empty key of at most %d bytes, such as \"unknown\"", clientip.Quote(key), maxKeyBytes)
	}
	c.UnknownKey = key
	return nil
}

// SetPolicy is WithPolicy: it names the quota and gives its rule, which must
// be valid.
func (c *Common[K, P]) SetPolicy(p Pkg, name string, rule admit.Rule) error {
	if err := c.SetPolicyName(p, "WithPolicy", name); err != nil {
		return err
	}
	if err := rule.Validate(); err != nil {
		return fmt.Errorf("%s: %w: WithPolicy(%s): %w", p, admit.ErrInvalidOption, clientip.Quote(name), err)
	}
	c.PolicyRule = &rule
	return nil
}

// SetPolicyName checks name as a quota's name and records which option, opt
// (WithPolicy or WithPolicyName), gave it.
func (c *Common[K, P]) SetPolicyName(p Pkg, opt, name string) error {
	if msg := ratehdr.QuotaNameError(opt, name); msg != "" {
		return p.Invalid("%s", msg)
	}
	if c.PolicyOpt != "" && c.PolicyOpt != opt {
		return p.Invalid("%s and %s both name the quota; pass one (WithPolicy also gives the rule, WithPolicyName keeps the limiter's)", c.PolicyOpt, opt)
	}
	c.PolicyOpt, c.PolicyName = opt, name
	return nil
}

// SetObserver is WithObserver: o must not be nil.
func (c *Common[K, P]) SetObserver(p Pkg, o observe.Observer) error {
	if o == nil {
		return p.Invalid("WithObserver(nil); pass an observe.Observer (a *tally.Tally, say), or leave the option out to observe nothing")
	}
	c.Observer = o
	return nil
}

// KeySep separates the parts of a key built by WithKeyFrom. No part may
// contain it: a part that does makes the call keyless, so no two distinct
// combinations of parts give the same key.
const KeySep = '\x00'

// JoinKey is the key of a call built from parts, whose values value gives:
// a single part's value as it is (a substring of the call: no allocation),
// or the values joined by [KeySep]. ok is false when a part has no value,
// and, for two parts or more, when a value contains KeySep or the key would
// be longer than maxKeyBytes.
func JoinKey[P any](parts []P, value func(P) (string, bool), maxKeyBytes int) (key string, ok bool) {
	if len(parts) == 1 {
		return value(parts[0])
	}
	var buf [256]byte
	b := buf[:0]
	for i, p := range parts {
		v, ok := value(p)
		if !ok || strings.IndexByte(v, KeySep) >= 0 {
			return "", false
		}
		if i > 0 {
			b = append(b, KeySep)
		}
		b = append(b, v...)
		if len(b) > maxKeyBytes {
			return "", false
		}
	}
	return string(b), true
}
