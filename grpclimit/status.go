package grpclimit

import (
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/admit-go/admit/internal/ratehdr"
)

// The metadata keys of the rate-limit fields: the lowercase names of
// draft-ietf-httpapi-ratelimit-headers-10's RateLimit and RateLimit-Policy
// header fields, whose values they carry unchanged (see package ratehdr).
const (
	MetadataRateLimit = "ratelimit"
	MetadataPolicy    = "ratelimit-policy"
)

// errUnkeyed refuses a server's call without a key (see WithUnknownKey).
var errUnkeyed = status.Error(codes.InvalidArgument,
	"grpclimit: the server cannot tell which client sent this call, so it cannot apply its rate limit")

// errClientUnkeyed refuses an outgoing call without a key.
var errClientUnkeyed = status.Error(codes.InvalidArgument,
	"grpclimit: the outgoing call has no key for the client's rate limit (a Metadata part it lacks, or a key over MaxKeyBytes), so it was not sent")

// metadataOf returns the rate-limit metadata of a decided call: ratelimit,
// and ratelimit-policy when the quota's window is known.
func metadataOf(v *verdict) metadata.MD {
	var buf [128]byte
	rl := string(v.p.AppendRateLimit(buf[:0], v.d.Remaining, v.p.ResetSeconds(v.d)))
	md := metadata.MD{MetadataRateLimit: []string{rl}}
	if v.q.Policy != "" {
		md[MetadataPolicy] = []string{v.q.Policy}
	}
	return md
}

// denial returns the error of a denied call: codes.ResourceExhausted, a
// message naming the quota and the delay, and the details RetryInfo (the
// delay) and QuotaFailure (the quota, its rule and its limit).
func denial(v *verdict, client bool) error {
	secs := ratehdr.RetrySeconds(v.d)
	msg := "grpclimit: quota " + strconv.Quote(v.p.Name) + " exceeded; retry in " + strconv.FormatInt(secs, 10) + "s"
	if client {
		msg = "grpclimit: quota " + strconv.Quote(v.p.Name) + " of outgoing calls exceeded; the call was not sent; retry in " + strconv.FormatInt(secs, 10) + "s"
	}
	viol := &errdetails.QuotaFailure_Violation{Subject: v.p.Name, QuotaValue: int64(v.d.Limit)}
	if v.p.Rule.Limit > 0 {
		viol.Description = v.p.Rule.String()
	}
	st := status.New(codes.ResourceExhausted, msg)
	// Seconds, not a time.Duration: the longest delay (admit.Never rounded
	// up) is one second more than a Duration can hold.
	with, err := st.WithDetails(
		&errdetails.RetryInfo{RetryDelay: &durationpb.Duration{Seconds: secs}},
		&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{viol}},
	)
	if err != nil {
		return st.Err() // unreachable: the code is not OK and both details marshal
	}
	return with.Err()
}
