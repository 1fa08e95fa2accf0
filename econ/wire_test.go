package econ

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/proto/econpb"
)

func debitPB(account string, amount int64) *econpb.Leg {
	return &econpb.Leg{Account: account, Side: econpb.Side_SIDE_DEBIT, Amount: amount}
}

func creditPB(account string, amount int64) *econpb.Leg {
	return &econpb.Leg{Account: account, Side: econpb.Side_SIDE_CREDIT, Amount: amount}
}

// goodRecord is a valid request: the platform pays a user 100.
func goodRecord(key string) *econpb.RecordRequest {
	return &econpb.RecordRequest{Scope: "market-01", Key: key, Legs: []*econpb.Leg{
		debitPB(ledger.Revenue, 100), creditPB(ledger.Spendable("u1"), 100),
	}}
}

// badRecordCase is a request the service must refuse, with the code and
// the field the refusal must name.
type badRecordCase struct {
	name  string
	mod   func(r *econpb.RecordRequest)
	code  string
	field string
}

func badRecordCases() []badRecordCase {
	manyLegs := func(r *econpb.RecordRequest) {
		r.Legs = nil
		for range MaxLegs/2 + 1 {
			r.Legs = append(r.Legs, debitPB(ledger.Revenue, 1), creditPB(ledger.Spendable("u1"), 1))
		}
	}
	return []badRecordCase{
		{"empty scope", func(r *econpb.RecordRequest) { r.Scope = "" }, ledger.CodeMalformed, "scope"},
		{"oversized scope", func(r *econpb.RecordRequest) { r.Scope = strings.Repeat("s", MaxScopeBytes+1) }, ledger.CodeMalformed, "scope"},
		{"scope with a space", func(r *econpb.RecordRequest) { r.Scope = "market 01" }, ledger.CodeMalformed, "scope"},
		{"scope not ASCII", func(r *econpb.RecordRequest) { r.Scope = "märkt" }, ledger.CodeMalformed, "scope"},
		{"empty key", func(r *econpb.RecordRequest) { r.Key = "" }, ledger.CodeMalformed, "key"},
		{"oversized key", func(r *econpb.RecordRequest) { r.Key = strings.Repeat("k", MaxKeyBytes+1) }, ledger.CodeMalformed, "key"},
		{"key with the hash separator", func(r *econpb.RecordRequest) { r.Key = "a|b" }, ledger.CodeMalformed, "key"},
		{"no legs", func(r *econpb.RecordRequest) { r.Legs = nil }, ledger.CodeMalformed, "legs"},
		{"too many legs", manyLegs, ledger.CodeMalformed, "legs"},
		{"empty account", func(r *econpb.RecordRequest) { r.Legs[0].Account = "" }, ledger.CodeMalformed, "legs[0].account"},
		{"account with a semicolon", func(r *econpb.RecordRequest) { r.Legs[1].Account = "u1;spendable" }, ledger.CodeMalformed, "legs[1].account"},
		{"account with a newline", func(r *econpb.RecordRequest) { r.Legs[1].Account = "u1\n" }, ledger.CodeMalformed, "legs[1].account"},
		{"oversized account", func(r *econpb.RecordRequest) { r.Legs[0].Account = strings.Repeat("a", MaxAccountBytes+1) }, ledger.CodeMalformed, "legs[0].account"},
		{"the clearing account", func(r *econpb.RecordRequest) { r.Legs[0].Account = ledger.NettingClearing }, ledger.CodeMalformed, "legs[0].account"},
		{"zero amount", func(r *econpb.RecordRequest) { r.Legs[0].Amount = 0 }, ledger.CodeMalformed, "legs[0].amount"},
		{"negative amount", func(r *econpb.RecordRequest) { r.Legs[1].Amount = -100 }, ledger.CodeMalformed, "legs[1].amount"},
		{"no side", func(r *econpb.RecordRequest) { r.Legs[0].Side = econpb.Side_SIDE_UNSPECIFIED }, ledger.CodeMalformed, "legs[0].side"},
		{"unknown side", func(r *econpb.RecordRequest) { r.Legs[1].Side = 7 }, ledger.CodeMalformed, "legs[1].side"},
		{"unbalanced", func(r *econpb.RecordRequest) { r.Legs[1].Amount = 99 }, ledger.CodeUnbalanced, "legs"},
		{"one-sided", func(r *econpb.RecordRequest) { r.Legs[1].Side = econpb.Side_SIDE_DEBIT }, ledger.CodeUnbalanced, "legs"},
		{"sum overflows", func(r *econpb.RecordRequest) {
			r.Legs = []*econpb.Leg{debitPB(ledger.Revenue, math.MaxInt64), debitPB(ledger.Revenue, math.MaxInt64), creditPB("u1:spendable", 2)}
		}, ledger.CodeUnbalanced, "legs"},
	}
}

func TestDecodeRecordRequestRefusesNamingTheField(t *testing.T) {
	for _, tc := range badRecordCases() {
		t.Run(tc.name, func(t *testing.T) {
			req := goodRecord("k-" + strings.ReplaceAll(tc.name, " ", "-"))
			tc.mod(req)
			_, _, err := DecodeRecordRequest(req)
			wantCode(t, err, tc.code)
			var re *RequestError
			if !errors.As(err, &re) || re.Field != tc.field {
				t.Fatalf("error %v: field %q, want %q", err, fieldOf(err), tc.field)
			}
			if tc.code == ledger.CodeMalformed && !errors.Is(err, ledger.ErrMalformed) {
				t.Errorf("errors.Is(%v, ledger.ErrMalformed) is false", err)
			}
			if tc.code == ledger.CodeUnbalanced && !errors.Is(err, ledger.ErrUnbalanced) {
				t.Errorf("errors.Is(%v, ledger.ErrUnbalanced) is false", err)
			}
		})
	}
}

func fieldOf(err error) string {
	var re *RequestError
	if errors.As(err, &re) {
		return re.Field
	}
	return ""
}

func TestRecordRequestRoundTrip(t *testing.T) {
	m := netting.Movement{Key: "buy-7", Legs: []ledger.Leg{
		ledger.Debit(ledger.Spendable("buyer"), 250),
		ledger.Credit(ledger.Earned("seller"), 200),
		ledger.Credit("platform:fees", 50),
	}}
	req, err := EncodeRecordRequest("market-03", m)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range req.GetLegs() {
		if l.GetAmount() <= 0 {
			t.Errorf("leg %d on the wire has amount %d; want positive", i, l.GetAmount())
		}
	}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var back econpb.RecordRequest
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	scope, got, err := DecodeRecordRequest(&back)
	if err != nil {
		t.Fatal(err)
	}
	if scope != "market-03" || fmt.Sprint(got) != fmt.Sprint(m) {
		t.Fatalf("round trip: %q %v, want %q %v", scope, got, "market-03", m)
	}
	// A movement the service would refuse is refused before sending.
	_, err = EncodeRecordRequest("market-03", netting.Movement{Key: "k", Legs: []ledger.Leg{{Account: "a", Amount: math.MinInt64}, {Account: "b", Amount: 1}}})
	wantCode(t, err, ledger.CodeMalformed)
	if f := fieldOf(err); f != "legs[0].amount" {
		t.Errorf("MinInt64 leg refused at %q, want legs[0].amount", f)
	}
}

func TestOtherRequestsRefusedNamingTheField(t *testing.T) {
	many := make([]string, MaxBalanceAccounts+1)
	for i := range many {
		many[i] = fmt.Sprintf("u%d:spendable", i)
	}
	for _, tc := range []struct {
		name  string
		err   error
		field string
	}{
		{"balances: none", CheckBalancesRequest(&econpb.BalancesRequest{}), "accounts"},
		{"balances: too many", CheckBalancesRequest(&econpb.BalancesRequest{Accounts: many}), "accounts"},
		{"balances: bad name", CheckBalancesRequest(&econpb.BalancesRequest{Accounts: []string{"ok", "not ok"}}), "accounts[1]"},
		{"pending: limit", func() error {
			_, err := CheckPendingRequest(&econpb.PendingRequest{Limit: MaxPendingPage + 1})
			return err
		}(), "limit"},
		{"pending: after", func() error { _, err := CheckPendingRequest(&econpb.PendingRequest{After: "a b"}); return err }(), "after"},
		{"recover: empty", CheckRecoverRequest(&econpb.RecoverRequest{}), "session_id"},
	} {
		wantCode(t, tc.err, ledger.CodeMalformed)
		if f := fieldOf(tc.err); f != tc.field {
			t.Errorf("%s: field %q, want %q", tc.name, f, tc.field)
		}
	}
	// The clearing account may be read, though not written.
	if err := CheckBalancesRequest(&econpb.BalancesRequest{Accounts: []string{ledger.NettingClearing}}); err != nil {
		t.Errorf("reading %s refused: %v", ledger.NettingClearing, err)
	}
	if n, err := CheckPendingRequest(&econpb.PendingRequest{}); err != nil || n != DefaultPendingPage {
		t.Errorf("default page: %d, %v", n, err)
	}
}

// TestStatusCarriesTheCode: every error the service sends reaches the
// client with its code, its class and the field, and matches the
// sentinels of that code with errors.Is.
func TestStatusCarriesTheCode(t *testing.T) {
	_, _, badLegs := DecodeRecordRequest(&econpb.RecordRequest{Scope: "s", Key: "k", Legs: []*econpb.Leg{debitPB("a", 0)}})
	for _, tc := range []struct {
		err      error
		code     string
		grpc     codes.Code
		sentinel error
		field    string
	}{
		{badLegs, ledger.CodeMalformed, codes.InvalidArgument, ledger.ErrMalformed, "legs[0].amount"},
		{ErrNotReady, CodeNotReady, codes.Unavailable, ErrNotReady, ""},
		{fmt.Errorf("wrapped: %w", ErrClosed), CodeClosed, codes.Unavailable, ErrClosed, ""},
		{ErrLeaseLost, CodeLeaseLost, codes.Unavailable, ErrLeaseLost, ""},
		{netting.ErrSessionSettled, netting.CodeSettled, codes.Aborted, netting.ErrSessionSettled, ""},
		{netting.ErrSessionNotFound, netting.CodeSessionNotFound, codes.NotFound, netting.ErrSessionNotFound, ""},
		{&netting.ChainBrokenError{SessionID: "s", Seq: 3}, netting.CodeChainBroken, codes.DataLoss, netting.ErrChainBroken, ""},
		{errors.New("disk on fire"), CodeInternal, codes.Internal, nil, ""},
	} {
		got := errorFromStatus(StatusOf(tc.err).Err(), "econ-a")
		if got.Code != tc.code || got.GRPC != tc.grpc || got.Field != tc.field || got.Node != "econ-a" {
			t.Errorf("%v: got code %q class %v field %q node %q; want %q %v %q", tc.err, got.Code, got.GRPC, got.Field, got.Node, tc.code, tc.grpc, tc.field)
		}
		if errcode.Of(got) != tc.code {
			t.Errorf("%v: errcode.Of = %q", tc.err, errcode.Of(got))
		}
		if tc.sentinel != nil && !errors.Is(got, tc.sentinel) {
			t.Errorf("%v: errors.Is(remote, %v) is false", tc.err, tc.sentinel)
		}
	}
	// The caller's own deadline is a status without a code, and matches
	// context.DeadlineExceeded.
	got := errorFromStatus(StatusOf(fmt.Errorf("x: %w", context.DeadlineExceeded)).Err(), "")
	if got.Code != "" || got.GRPC != codes.DeadlineExceeded || !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("deadline: %+v", got)
	}
}
