package econ

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/proto/econpb"
)

// Request kinds of FuzzRequestValidation: the first input byte picks the
// message the rest is decoded as (the requests a caller's bytes become
// before the server checks them).
const (
	fuzzRecord = iota
	fuzzBalances
	fuzzPending
	fuzzRecover
	fuzzKinds
)

func fuzzSeed(kind byte, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return append([]byte{kind}, b...)
}

// FuzzRequestValidation: whatever bytes arrive, the server's validation
// never panics, and either refuses with a *RequestError (OP.MALFORMED or a
// ledger code, a field named, sent as InvalidArgument with the code and the
// field in its ErrorInfo), or accepts a request inside every limit whose
// movement the ledger accepts and that survives a re-encode unchanged.
func FuzzRequestValidation(f *testing.F) {
	f.Add(fuzzSeed(fuzzRecord, goodRecord("seed-1")))
	for _, tc := range badRecordCases() {
		req := goodRecord("seed-bad")
		tc.mod(req)
		f.Add(fuzzSeed(fuzzRecord, req))
	}
	f.Add(fuzzSeed(fuzzBalances, &econpb.BalancesRequest{Accounts: []string{"u1:spendable", ledger.NettingClearing}}))
	f.Add(fuzzSeed(fuzzPending, &econpb.PendingRequest{After: "u1:spendable", Limit: 10}))
	f.Add(fuzzSeed(fuzzRecover, &econpb.RecoverRequest{SessionId: "sess:market-01:ab12-3"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		kind, body := data[0]%fuzzKinds, data[1:]
		var err error
		switch kind {
		case fuzzRecord:
			var req econpb.RecordRequest
			if proto.Unmarshal(body, &req) != nil {
				return
			}
			err = checkAcceptedRecord(t, &req)
		case fuzzBalances:
			var req econpb.BalancesRequest
			if proto.Unmarshal(body, &req) != nil {
				return
			}
			if err = CheckBalancesRequest(&req); err == nil && (len(req.Accounts) == 0 || len(req.Accounts) > MaxBalanceAccounts) {
				t.Fatalf("accepted %d accounts", len(req.Accounts))
			}
		case fuzzPending:
			var req econpb.PendingRequest
			if proto.Unmarshal(body, &req) != nil {
				return
			}
			var n int
			if n, err = CheckPendingRequest(&req); err == nil && (n < 1 || n > MaxPendingPage) {
				t.Fatalf("accepted a page of %d", n)
			}
		case fuzzRecover:
			var req econpb.RecoverRequest
			if proto.Unmarshal(body, &req) != nil {
				return
			}
			if err = CheckRecoverRequest(&req); err == nil && (req.SessionId == "" || len(req.SessionId) > MaxSessionIDBytes) {
				t.Fatalf("accepted session id %q", req.SessionId)
			}
		}
		if err != nil {
			checkRefusal(t, err)
		}
	})
}

// checkAcceptedRecord decodes req and, if it is accepted, checks what was
// accepted; it returns the refusal.
func checkAcceptedRecord(t *testing.T, req *econpb.RecordRequest) error {
	scope, m, err := DecodeRecordRequest(req)
	if err != nil {
		return err
	}
	if len(scope) == 0 || len(scope) > MaxScopeBytes || len(m.Key) == 0 || len(m.Key) > MaxKeyBytes {
		t.Fatalf("accepted scope %q key %q", scope, m.Key)
	}
	if len(m.Legs) == 0 || len(m.Legs) > MaxLegs {
		t.Fatalf("accepted %d legs", len(m.Legs))
	}
	if err := ledger.ValidateLegs(m.Legs); err != nil {
		t.Fatalf("accepted legs the ledger refuses: %v", err)
	}
	for i, l := range m.Legs {
		if err := CheckAccount("a", l.Account); err != nil {
			t.Fatalf("accepted leg %d account %q: %v", i, l.Account, err)
		}
	}
	again, err := EncodeRecordRequest(scope, m)
	if err != nil {
		t.Fatalf("re-encoding an accepted movement: %v", err)
	}
	scope2, m2, err := DecodeRecordRequest(again)
	if err != nil || scope2 != scope || fmt.Sprint(m2) != fmt.Sprint(m) {
		t.Fatalf("re-encode changed the movement: %q %v → %q %v (%v)", scope, m, scope2, m2, err)
	}
	return nil
}

func checkRefusal(t *testing.T, err error) {
	var re *RequestError
	if !errors.As(err, &re) || re.Field == "" {
		t.Fatalf("refusal %v is not a *RequestError naming a field", err)
	}
	code := errcode.Of(err)
	if code != ledger.CodeMalformed && code != ledger.CodeUnbalanced {
		t.Fatalf("refusal %v has code %q", err, code)
	}
	st := StatusOf(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("refusal %v sent as %v", err, st.Code())
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.Reason != code || info.Domain != ErrorDomain || info.Metadata["field"] != re.Field {
		t.Fatalf("refusal %v sent with ErrorInfo %v", err, info)
	}
}
