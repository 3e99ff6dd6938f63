// Package policy applies rate-limit rules from configuration to requests
// identified by a user and an API.
//
// A [Book] holds the rules: a default rule, rules for particular APIs and
// rules for particular users. The most specific rule wins: the user's rule,
// else the API's rule, else the default ([Book.LimitsFor]). Each may be a
// composite, several rules that all apply at once (an [admit.Limits]): a
// request is admitted only if every rule admits it, and then every rule is
// charged. Books are read from the properties format of the design notes
// ([Parse]) or from JSON ([ParseJSON], where a composite is an array of
// rules); [Load] picks the format by the file's extension:
//
//	# rules.conf
//	default     = token-bucket,5,10s
//	api./login  = fixed-window,2,10s
//	api./search = token-bucket,10,1s + fixed-window,1000,1h
//	user.vip-1  = token-bucket,8,10s
//
// Both readers are strict, because a typo in a limit is a production
// incident: anything they cannot read is an error (an *[Error]) that says
// where it is (a line, a JSON path) and what would be right; nothing is
// skipped or defaulted. Input is bounded ([MaxLineBytes], [MaxLines],
// [MaxJSONBytes], [MaxRules], [MaxNameBytes]), so a hostile file cannot
// exhaust memory.
//
// A [Service] checks requests against a book, with one independent budget per
// (user, API) pair:
//
//	book, err := policy.Load("rules.conf")
//	if err != nil {
//		log.Fatal(err) // rules.conf: line 3: api./login: admit: invalid rule: …
//	}
//	svc, err := policy.NewService(book)
//	if err != nil {
//		log.Fatal(err)
//	}
//	if d := svc.Check(userID, "/login"); !d.Allowed {
//		// deny, with d.RetryAfter as the Retry-After hint
//	}
//
// [Service.CheckNWhich] also says which rule of a composite bound the
// decision. [Service.Reload] swaps in a new book while requests are being
// checked; the pairs whose limits did not change keep their budgets, and
// those whose limits change carry what they spent ([WithCarry]). See
// docs/configuration.md for both formats, composites, every error, reload
// semantics and memory costs.
package policy
