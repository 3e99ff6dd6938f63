package admit

import "strconv"

// Carry says what a key's state becomes when the limits it is decided under
// change (policy.WithCarry): whether a client keeps what it has spent. Every
// strategy is at least as strict as starting fresh, so none lets a key pass
// more than the new limits allow from the moment of the change;
// docs/algorithms.md defines each per algorithm. The zero Carry is not a
// strategy.
type Carry uint8

const (
	// CarryConsumed keeps what the key has consumed, at most the new Limit:
	// after 7 of 10, a limit raised to 20 leaves 13, one lowered to 5
	// leaves none. The default: it hands no one a fresh burst.
	CarryConsumed Carry = iota + 1

	// CarryProportional keeps the same fraction of the budget consumed:
	// after 7 of 10, a limit raised to 20 leaves 6, one lowered to 5
	// leaves 1.
	CarryProportional

	// CarryNothing starts every key fresh under the new limits.
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
