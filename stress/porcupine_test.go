package stress

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/admit-go/admit"
)

// Linearizability (docs/reliability.md). Every object (a key, or a policy
// pair under one rule) is a register of kernel state, and its operations are
// the recorded AllowN calls. The clock moves only at quiescent points, between
// phases, so an object's history is the concatenation of its phases'
// histories, and it is linearizable iff each phase's history is, starting
// from the state the earlier phases left. That state is unique: at a frozen
// reading the admissions of a phase add up the same in any order, and
// nothing else changes the state. So each (object, phase) is checked as a
// partition of its own (porcupine checks partitions in parallel), with the
// phase's reading and starting state in its operations' input; the model is
// deterministic, and Step runs the kernel on a copy of the state.
//
// An admission must match the kernel's Decision exactly (Allowed, Limit,
// Remaining, RetryAfter, ResetAfter), which pins it to one state. A denial
// or a probe changes no state, and is checked up to monotone bounds: a
// denial must be one the kernel makes, with Remaining 0, RetryAfter Never
// exactly when the kernel's is, and RetryAfter and ResetAfter at most the
// kernel's; a probe must be allowed, with Remaining at least the kernel's
// and ResetAfter at most the kernel's. Within a phase (a frozen clock) the
// budget only shrinks, and the kernel's RetryAfter and ResetAfter only grow
// and its Remaining only falls as it does, so each read-only operation is
// valid on a suffix of the phase's states. That is what keeps porcupine's
// search linear: with exact matching, a denial is valid in one state only,
// and when the depth-first search has linearized an admission past it, it
// backtracks through every subset of the concurrent denials (measured: a
// 4,000-operation history of 32 clients timed out after a minute). The exact
// values are the business of the sequential suites (internal/conformance);
// checkReplay bounds probes from the other side. A composite's read-only
// operation also names the rule that bound it, which is not monotone within
// a phase, so its Limit need only name a rule that denies n (a denial) or
// has at most the reported Remaining left (a probe): facts that stay true
// for the rest of the phase once true (compositeSpec.readOnly).
//
// The model has no eviction: if a store evicts a key that was not equivalent
// to a fresh one, the next call sees a fresh state, reports a fresh
// Remaining, and the history is Illegal. The one nondeterminism is the
// full-store denial of a store with WithMaxKeys, allowed only while the
// model's state is fresh (a stored key is never denied for lack of room).

// pInput is an operation's input: a request for n on the partition part
// (an object in a phase), whose reading is at and whose starting state is
// start under spec sp.
type pInput struct {
	part  int
	at    time.Duration
	sp    spec
	start any
	n     int
}

// pState is the model's state: the reading and one object's kernel state
// (nil until the first operation brings the partition's starting state).
type pState struct {
	now time.Duration
	sp  spec
	s   any
}

// partitionByPart splits a history into its (object, phase) partitions.
func partitionByPart(hist []porcupine.Operation) [][]porcupine.Operation {
	idx := map[int]int{}
	var parts [][]porcupine.Operation
	for _, o := range hist {
		in := o.Input.(pInput)
		i, ok := idx[in.part]
		if !ok {
			i = len(parts)
			idx[in.part] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], o)
	}
	return parts
}

func linearizabilityModel(maxKeys int) porcupine.Model {
	return porcupine.Model{
		Partition: partitionByPart,
		Init:      func() any { return pState{} },
		Step: func(state, input, output any) (bool, any) {
			st, in := state.(pState), input.(pInput)
			if st.s == nil {
				st = pState{now: in.at, sp: in.sp, s: in.start}
			}
			out := output.(admit.Decision)
			if maxKeys > 0 && storeFull(in.n, out) && st.sp.fresh(st.s, st.now) {
				return true, st
			}
			d, next := st.sp.step(st.s, st.now, in.n)
			ok := matches(in.n, d, out)
			if c, isComposite := st.sp.(*compositeSpec); isComposite && !(out.Allowed && in.n > 0) {
				ok = c.readOnly(st.s, st.now, in.n, d, out)
			}
			if !ok {
				return false, state
			}
			st.s = next
			return true, st
		},
		Equal: func(a, b any) bool {
			x, y := a.(pState), b.(pState)
			if x.now != y.now || (x.s == nil) != (y.s == nil) {
				return false
			}
			return x.s == nil || x.sp.equal(x.s, y.s)
		},
		Hash: func(state any) uint64 {
			st := state.(pState)
			h := uint64(st.now) * 0x9e3779b97f4a7c15
			if st.s != nil {
				h ^= st.sp.hash(st.s)
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			in := input.(pInput)
			d := output.(admit.Decision)
			return fmt.Sprintf("AllowN(%d) → %v rem=%d retry=%v reset=%v", in.n, d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
		},
		DescribeState: func(state any) string {
			st := state.(pState)
			return fmt.Sprintf("t=%v %+v", st.now, st.s)
		},
	}
}

// matches reports whether the recorded Decision out is one the model may
// give for a request of n whose kernel Decision is d (see the file comment).
func matches(n int, d, out admit.Decision) bool {
	switch {
	case out.Allowed && n > 0:
		return d == out
	case out.Allowed: // a probe
		return d.Allowed && out.Limit == d.Limit && out.RetryAfter == 0 &&
			out.Remaining >= d.Remaining && out.ResetAfter <= d.ResetAfter
	default:
		return !d.Allowed && out.Limit == d.Limit && out.Remaining == 0 &&
			(out.RetryAfter == admit.Never) == (d.RetryAfter == admit.Never) &&
			out.RetryAfter <= d.RetryAfter && out.ResetAfter <= d.ResetAfter
	}
}

// linStats summarises what checkLinearizable saw.
type linStats struct {
	objects, ops int
	elapsed      time.Duration
	vizPath      string
}

// checkLinearizable checks every (object, phase) history with porcupine, all
// at once with one timeout; Unknown (a timeout) is a failure. On failure it
// checks the partitions one by one, in phase order, to name the first
// failing phase of each failing object, and writes the first one's
// visualization to a new temporary directory under vizDir (os.TempDir() if
// empty; none if vizDir is "-") and names the file in the error.
func checkLinearizable(h *history, s subject, timeout time.Duration, vizDir string) (st linStats, err error) {
	if !h.exact {
		return st, fmt.Errorf("checkLinearizable: the history has stale or moving readings")
	}
	began := time.Now()
	defer func() { st.elapsed = time.Since(began) }()
	objs, keys := byObject(h)
	model := linearizabilityModel(s.maxKeys)
	type part struct {
		key   string
		phase int
		hist  []porcupine.Operation
	}
	var parts []part
	var all []porcupine.Operation
	for _, key := range keys {
		ops := objs[key]
		_, sp, ok := s.classify(key, ops[0].d)
		if !ok {
			continue // checkDecisions reports it
		}
		st.objects++
		st.ops += len(ops)
		byPhase := make([][]op, len(h.phaseAt))
		for _, o := range ops {
			byPhase[o.phase] = append(byPhase[o.phase], o)
		}
		state := sp.init()
		for p, pops := range byPhase {
			if len(pops) == 0 {
				continue
			}
			t := h.phaseAt[p]
			in := pInput{part: len(parts), at: t, sp: sp, start: state}
			hist := make([]porcupine.Operation, len(pops))
			for i, o := range pops {
				in.n = o.n
				hist[i] = porcupine.Operation{ClientId: o.client, Input: in, Call: o.call, Output: o.d, Return: o.ret}
				// The phase's end state: its admissions, in any order. If
				// the kernel refuses one, the phase is not linearizable, and
				// later phases start from the refusal's state: only the first
				// failing phase of an object is reported.
				if o.d.Allowed && o.n > 0 {
					if d, next := sp.step(state, t, o.n); d.Allowed {
						state = next
					}
				}
			}
			parts = append(parts, part{key: key, phase: p, hist: hist})
			all = append(all, hist...)
		}
	}
	res := porcupine.CheckOperationsTimeout(model, all, timeout)
	if res == porcupine.Ok {
		return st, nil
	}
	var failures []string
	failed := map[string]bool{}
	for _, pt := range parts {
		if failed[pt.key] {
			continue
		}
		r := porcupine.CheckOperationsTimeout(model, pt.hist, timeout)
		if r == porcupine.Ok {
			continue
		}
		failed[pt.key] = true
		msg := fmt.Sprintf("%s phase %d (t=%v): %s (%d operations, %d clients)", pt.key, pt.phase, h.phaseAt[pt.phase], r, len(pt.hist), h.clients)
		if r == porcupine.Unknown {
			msg += fmt.Sprintf("; the check timed out after %v, which counts as a failure", timeout)
		}
		if vizDir != "-" && st.vizPath == "" {
			if path, err := visualize(model, pt.hist, timeout, vizDir, fmt.Sprintf("%s-phase%d", pt.key, pt.phase)); err != nil {
				msg += "; no visualization: " + err.Error()
			} else {
				st.vizPath = path
				msg += "; visualization: " + path
			}
		}
		failures = append(failures, msg)
		if len(failures) == maxReported {
			break
		}
	}
	if len(failures) == 0 {
		failures = append(failures, fmt.Sprintf("the whole history is %s but every partition alone is Ok (a timeout of %v over all of them?)", res, timeout))
	}
	return st, fmt.Errorf("linearizability (porcupine against the sequential kernel): %d object(s) not linearizable:\n\t%s",
		len(failures), strings.Join(failures, "\n\t"))
}

// visualize writes porcupine's HTML visualization of hist to a new
// directory under dir and returns the file's path.
func visualize(model porcupine.Model, hist []porcupine.Operation, timeout time.Duration, dir, key string) (string, error) {
	_, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	d, err := os.MkdirTemp(dir, "admit-stress-")
	if err != nil {
		return "", err
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '|' || r == '#' || r == ' ' {
			return '_'
		}
		return r
	}, key)
	path := filepath.Join(d, "porcupine-"+name+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return "", err
	}
	return path, nil
}
