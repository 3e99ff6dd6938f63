//go:build !admittest

package atomic_test

import "github.com/admit-go/admit/internal/conformance"

// hooks gives the conformance suite its view of New's store. In a normal
// build the table (internal/table) has no pause point nor any other test
// hook, so none is set, and the checks that need them skip (or leave out
// what they would assert with them); builds with the tag admittest (make
// test) set them all (hooks_on_test.go).
var hooks = &conformance.StoreHooks{}
