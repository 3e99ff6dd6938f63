package main

import (
	"strings"
	"testing"
)

// sampleDump is a callgrind output file, cut down from a dump of
// "instr keyed": the loop calls a function 100,000 times.
const sampleDump = `# callgrind format
version: 1
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 9000022 2900004 2300008 0 206072 0 0 15475

ob=(1) /tmp/admit-instr
fl=(2) /work/bench/cmd/instr/valgrind_amd64.go
fn=(2) main.runKeyed
fi=(14) /work/bench/cmd/instr/keyed.go
cfi=(14)
cfn=(92) main.measureKeyedLoop
calls=1 92 
181 9000022 2900004 2300008 0 206072 0 0 15475
fe=(2)

fl=(14)
fn=(94) main.(*keyedClockOnly).Allow
109 500000 100000 100000

fn=(92)
92 5 1 1
+2 7 0 7
+1 700000 300000 100000 0 99924 0 0 4724
cfn=(94)
calls=100000 +14 
* 4500000 1100000 1200000 0 99898 0 0 4893
-1 300003 100001
+1 800000 100000 0 0 6250 0 0 5858

totals: 9000022 2900004 2300008 0 206072 0 0 15475
`

func TestEvents(t *testing.T) {
	ev, err := events(strings.NewReader(sampleDump))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"Ir": 9000022, "Dr": 2900004, "Dw": 2300008, "I1mr": 0, "D1mr": 206072, "D1mw": 0, "ILmr": 0, "DLmr": 15475, "DLmw": 0}
	for name, n := range want {
		if ev[name] != n {
			t.Errorf("events: %s = %d, want %d", name, ev[name], n)
		}
	}
	if n, err := totals(strings.NewReader("events: Ir\nsummary: 7\n")); err != nil || n != 7 {
		t.Errorf("totals of a summary-only file = %d, %v; want 7", n, err)
	}
}

func TestExclusive(t *testing.T) {
	ex, err := exclusive(strings.NewReader(sampleDump), "main.measureKeyedLoop")
	if err != nil {
		t.Fatal(err)
	}
	// The loop's own lines, without the line after calls= (the callee's
	// inclusive cost) and without main.runKeyed's call line.
	want := map[string]int64{"Ir": 5 + 7 + 700000 + 300003 + 800000, "Dr": 1 + 300000 + 100001 + 100000, "D1mr": 99924 + 6250, "DLmr": 4724 + 5858}
	for name, n := range want {
		if ex[name] != n {
			t.Errorf("exclusive: %s = %d, want %d", name, ex[name], n)
		}
	}
}
