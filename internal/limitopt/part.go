package limitopt

import "strconv"

// PartKind is what a KeyPart of httplimit or grpclimit takes its value
// from. 0 is the zero KeyPart, which is not a part.
type PartKind uint8

const (
	PartIP     PartKind = iota + 1 // the client's address: ClientIP, PeerIP
	PartNamed                      // a header or metadata key: RequestHeader, Metadata
	PartMethod                     // the method: Method (HTTP's), FullMethod (gRPC's)
	PartPath                       // the URL path: Path
	PartRoute                      // the pattern that matched: Route
	numPartKinds
)

// Part is what each package's KeyPart holds: its kind and, for PartNamed,
// the header or metadata key, as the package looks it up.
type Part struct {
	Kind PartKind
	Name string
}

// Ctors names a package's KeyPart constructors by kind, "" for a kind the
// package does not have.
type Ctors [numPartKinds]string

// Go returns p as it would be written in Go, for error messages: its
// constructor's call, "ClientIP()" or "RequestHeader(\"X-Api-Key\")", or
// "KeyPart{}" for the zero part.
func (p Part) Go(ctors *Ctors) string {
	switch {
	case p.Kind >= numPartKinds || ctors[p.Kind] == "":
		return "KeyPart{}"
	case p.Kind == PartNamed:
		return ctors[p.Kind] + "(" + strconv.Quote(p.Name) + ")"
	}
	return ctors[p.Kind] + "()"
}
