package policy

import "strconv"

// Carry says what a key's state becomes when the limits it is decided under
// change ([WithCarry]): whether a client keeps what it has spent. Every
// strategy is at least as strict as starting fresh, so none lets a key pass
// more than the new limits allow from the moment of the change;
// docs/algorithms.md defines each per algorithm. No strategy clamps what it
// carries to the new Limit: a state keeps a consumption past it (a count
// above the Limit, a bucket in debt past a full bucket), denied until it
// rolls out or refills. The zero Carry is not a strategy.
type Carry uint8

const (
	// CarryConsumed keeps what the key has consumed, all of it: after 7 of
	// 10, a limit raised to 20 leaves 13, one lowered to 5 leaves none (7
	// spent of 5), and one raised back to 10 leaves 3. The default: it
	// hands no one a fresh burst, and on a clock that does not move a key
	// is admitted at most the largest limit it was under, however the
	// limits change (a composite's smallest rule's).
	CarryConsumed Carry = iota + 1

	// CarryProportional keeps the same fraction of the budget consumed:
	// after 7 of 10, a limit raised to 20 leaves 6, one lowered to 5
	// leaves 1. On a clock that does not move a key is admitted at most
	// the largest Limit of any rule it was under: for one-rule limits the
	// largest limit in force, for composites possibly more than their
	// smallest rules (docs/algorithms.md has the proof and an example).
	CarryProportional

	// CarryNothing starts every key fresh under the new limits: it keeps
	// no promise across changes, each of which can hand out a new budget.
	CarryNothing
)

var carryNames = [...]string{CarryConsumed: "consumed", CarryProportional: "proportional", CarryNothing: "nothing"}

// String returns the strategy's name: "consumed", "proportional" or
// "nothing".
func (c Carry) String() string {
	if c >= CarryConsumed && c <= CarryNothing {
		return carryNames[c]
	}
	return "Carry(" + strconv.Itoa(int(c)) + ")"
}
