package policy

// The object form of a rule ({"algorithm": …, "algoConfig": {…}}), the
// exact reading of its numbers, and the texts that say what a rule may look
// like in errors.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/admit-go/admit"
)

// ruleWant says what a rule may look like, for error messages.
const ruleWant = `want rule text such as "token-bucket,5,10s", an object such as {"algorithm": "TokenBucket", "algoConfig": {"capacity": 5, "refillRatePerSecond": 0.5}}, or an array of such rules that all apply`

// elementWant says what an element of a composite's array may look like.
const elementWant = `an element of the array is one rule: rule text such as "token-bucket,5,10s" or an object such as {"algorithm": "FixedWindow", "algoConfig": {"maxRequests": 1000, "windowMs": 3600000}}`

// objectForm is one algorithm of the object form of a rule.
type objectForm struct {
	name   string // the "algorithm" value, such as "TokenBucket"
	alg    admit.Algorithm
	params [2]string // the algoConfig fields, all required
}

var objectForms = []objectForm{
	{"TokenBucket", admit.TokenBucket, [2]string{"capacity", "refillRatePerSecond"}},
	{"FixedWindow", admit.FixedWindow, [2]string{"maxRequests", "windowMs"}},
	{"SlidingWindowLog", admit.SlidingLog, [2]string{"maxRequests", "windowMs"}},
	{"SlidingWindowCounter", admit.SlidingCounter, [2]string{"maxRequests", "windowMs"}},
}

func (f objectForm) wants() string {
	return fmt.Sprintf("%s wants %q and %q", f.name, f.params[0], f.params[1])
}

// param is one field of an algoConfig object.
type param struct {
	name string
	val  json.Number
	off  int64
}

// ruleObject reads the object form of a rule after its '{' (at offset open).
func (p *jsonParser) ruleObject(path string, open int64) (admit.Rule, error) {
	var (
		alg          string
		algOff       int64
		params       []param
		cfgOff       int64
		seen         = map[string]int64{}
		cfgPath      = join(path, "algoConfig")
		algorithmErr = func(tok json.Token, off int64) error {
			return p.errorAt(off, join(path, "algorithm"), fmt.Sprintf("%s is not an algorithm; want one of %s", describe(tok), formNames()), nil)
		}
	)
	for p.lex.More() {
		key, off, err := p.key(path)
		if err != nil {
			return admit.Rule{}, err
		}
		if err := p.dup(seen, key, off, path); err != nil {
			return admit.Rule{}, err
		}
		switch key {
		case "algorithm":
			tok, off, err := p.next(join(path, key))
			if err != nil {
				return admit.Rule{}, err
			}
			s, ok := tok.(string)
			if !ok {
				return admit.Rule{}, algorithmErr(tok, off)
			}
			alg, algOff = s, off
		case "algoConfig":
			if cfgOff, err = p.open(cfgPath, `an object of the algorithm's parameters, such as {"maxRequests": 5, "windowMs": 1000}`); err != nil {
				return admit.Rule{}, err
			}
			cfgSeen := map[string]int64{}
			for p.lex.More() {
				name, off, err := p.key(cfgPath)
				if err != nil {
					return admit.Rule{}, err
				}
				if err := p.dup(cfgSeen, name, off, cfgPath); err != nil {
					return admit.Rule{}, err
				}
				tok, voff, err := p.next(join(cfgPath, name))
				if err != nil {
					return admit.Rule{}, err
				}
				n, ok := tok.(json.Number)
				if !ok {
					return admit.Rule{}, p.errorAt(voff, join(cfgPath, name), fmt.Sprintf("%s is not a number; want a number such as 10", describe(tok)), nil)
				}
				params = append(params, param{name, n, voff})
			}
			if err := p.close(cfgPath); err != nil {
				return admit.Rule{}, err
			}
		default:
			if err := p.unknownField(key, off, path, []string{"algorithm", "algoConfig"}, `a rule object has only "algorithm" and "algoConfig"`); err != nil {
				return admit.Rule{}, err
			}
		}
	}
	if err := p.close(path); err != nil {
		return admit.Rule{}, err
	}
	if algOff == 0 {
		return admit.Rule{}, p.errorAt(open, path, fmt.Sprintf(`missing field "algorithm"; want one of %s`, formNames()), nil)
	}
	var form objectForm
	for _, f := range objectForms {
		if f.name == alg {
			form = f
		}
	}
	if form.alg == 0 {
		for _, f := range objectForms {
			if strings.EqualFold(f.name, alg) {
				return admit.Rule{}, p.errorAt(algOff, join(path, "algorithm"), fmt.Sprintf("unknown algorithm %s; algorithm names are case-sensitive: did you mean %q?", quoteName(alg), f.name), nil)
			}
		}
		return admit.Rule{}, p.errorAt(algOff, join(path, "algorithm"), fmt.Sprintf("unknown algorithm %s; want one of %s", quoteName(alg), formNames()), nil)
	}
	if cfgOff == 0 {
		return admit.Rule{}, p.errorAt(open, path, fmt.Sprintf(`missing field "algoConfig"; %s`, form.wants()), nil)
	}
	var vals [2]param
	for _, pm := range params {
		i := 0
		for i < 2 && form.params[i] != pm.name {
			i++
		}
		if i == 2 {
			return admit.Rule{}, p.unknownField(pm.name, pm.off, cfgPath, form.params[:], form.wants())
		}
		vals[i] = pm
	}
	for i, v := range vals {
		if v.off == 0 {
			return admit.Rule{}, p.errorAt(cfgOff, cfgPath, fmt.Sprintf("missing field %q; %s", form.params[i], form.wants()), nil)
		}
	}
	r, bad, msg := form.rule(vals)
	if msg != "" {
		return admit.Rule{}, p.errorAt(vals[bad].off, join(cfgPath, vals[bad].name), msg, nil)
	}
	if err := r.Validate(); err != nil {
		return admit.Rule{}, p.errorAt(open, path, "as "+r.String(), err)
	}
	return r, nil
}

func formNames() string {
	names := make([]string, len(objectForms))
	for i, f := range objectForms {
		names[i] = fmt.Sprintf("%q", f.name)
	}
	return strings.Join(names, ", ")
}

// rule converts the form's two parameters to a rule. On error it returns
// which parameter is at fault and the message.
func (f objectForm) rule(vals [2]param) (admit.Rule, int, string) {
	first, msg := whole(vals[0].val, admit.MaxLimit)
	if msg != "" {
		return admit.Rule{}, 0, msg
	}
	if f.alg != admit.TokenBucket {
		ms, msg := whole(vals[1].val, math.MaxInt64/uint64(time.Millisecond))
		if msg != "" {
			return admit.Rule{}, 1, msg
		}
		return admit.Rule{Algorithm: f.alg, Limit: int(first), Window: time.Duration(ms) * time.Millisecond}, 0, ""
	}
	w, msg := refillWindow(first, string(vals[1].val))
	if msg != "" {
		return admit.Rule{}, 1, msg
	}
	return admit.Rule{Algorithm: admit.TokenBucket, Limit: int(first), Window: w}, 0, ""
}

// whole reads a JSON number that must be a whole number in [1, max].
func whole(n json.Number, max uint64) (uint64, string) {
	s := string(n)
	const want = "want a whole number such as 10, written without a fraction or an exponent"
	switch {
	case strings.HasPrefix(s, "-"):
		return 0, fmt.Sprintf("%s must be at least 1", clip(s))
	case strings.ContainsAny(s, ".eE"):
		return 0, fmt.Sprintf("%s is not accepted; %s", clip(s), want)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > max {
		return 0, fmt.Sprintf("%s exceeds the maximum %d", clip(s), max)
	}
	if v == 0 {
		return 0, "0 must be at least 1"
	}
	return v, ""
}

// maxRateDigits bounds the digits of a refill rate, to keep the exact
// arithmetic on it small.
const maxRateDigits = 40

// refillWindow returns the window in which a bucket of capacity tokens refills
// at rate tokens per second: capacity/rate seconds, exactly, or a message.
func refillWindow(capacity uint64, rate string) (time.Duration, string) {
	const want = "want a positive decimal number of tokens per second, such as 2 or 0.5, written without an exponent"
	switch {
	case strings.HasPrefix(rate, "-"):
		return 0, fmt.Sprintf("%s must be positive; %s", clip(rate), want)
	case strings.ContainsAny(rate, "eE"):
		return 0, fmt.Sprintf("%s is not accepted; %s", clip(rate), want)
	case len(rate) > maxRateDigits:
		return 0, fmt.Sprintf("%s has more than %d digits; %s", clip(rate), maxRateDigits, want)
	}
	intPart, frac, _ := strings.Cut(rate, ".")
	m, _ := new(big.Int).SetString(intPart+frac, 10) // digits only: JSON syntax checked it
	if m.Sign() == 0 {
		return 0, fmt.Sprintf("%s must be positive (a bucket that never refills is not a rate limit); %s", rate, want)
	}
	// capacity / (m / 10^len(frac)) seconds = capacity × 10^(9+len(frac)) / m ns.
	num := new(big.Int).Mul(new(big.Int).SetUint64(capacity), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(9+len(frac))), nil))
	q, rem := new(big.Int).QuoRem(num, m, new(big.Int))
	if rem.Sign() != 0 {
		half := strconv.FormatUint(capacity/2, 10)
		if capacity%2 == 1 {
			half += ".5"
		}
		return 0, fmt.Sprintf("the refill window capacity / refillRatePerSecond = %d / %s seconds is not a whole number of nanoseconds; choose a rate that divides capacity × 10^9 exactly, such as %d (a 1s window) or %s (2s)",
			capacity, rate, capacity, half)
	}
	if !q.IsInt64() {
		return 0, fmt.Sprintf("the refill window capacity / refillRatePerSecond = %d / %s seconds overflows a time.Duration (about 292 years); raise the rate", capacity, rate)
	}
	return time.Duration(q.Int64()), ""
}
