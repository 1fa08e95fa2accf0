package econ

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/proto/econpb"
)

// rawCodec sends and receives bytes as they are: what a client in another
// language, or a broken one, puts on the wire.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// rawConn is a connection to addr whose calls carry hand-made bytes.
func rawConn(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// callRaw sends body to method ("Record") and returns the reply's bytes.
func callRaw(ctx context.Context, cc *grpc.ClientConn, method string, body []byte) ([]byte, error) {
	var reply []byte
	err := cc.Invoke(ctx, "/shardwise.econ.v1.Economy/"+method, &body, &reply)
	return reply, err
}

func marshalPB(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// str is one length-delimited field whose bytes are v, UTF-8 or not.
func str(num protowire.Number, v string) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendString(b, v)
}

// rawRecord is a RecordRequest built by hand: scope, key, then the legs
// (each from rawLeg).
func rawRecord(scope, key string, legs ...[]byte) []byte {
	b := append(str(1, scope), str(2, key)...)
	for _, l := range legs {
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, l)
	}
	return b
}

func rawLeg(account string, side econpb.Side, amount int64) []byte {
	b := str(1, account)
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(side))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(amount))
}

// TestServerAnswersUndecodableRequestsWithACode: bytes that are not the
// message, a string that is not UTF-8 and a message over MaxRequestBytes
// are answered with the service's ErrorInfo (OP.MALFORMED naming the field
// where there is one, OP.TOO_LARGE) on every call, an operator call on
// garbage does not run, and nothing is written. Without the request codec
// (ServerOptions) gRPC answers them INTERNAL and RESOURCE_EXHAUSTED with no
// code (the issue 27 sequence 3).
func TestServerAnswersUndecodableRequestsWithACode(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	waitView(t, []string{"econ-a"}, a.Node)
	cc := rawConn(t, a.addr)
	ctx := testCtx(t)

	good := [][]byte{rawLeg("platform:mint", econpb.Side_SIDE_DEBIT, 5), rawLeg(ledger.Spendable("u1"), econpb.Side_SIDE_CREDIT, 5)}
	big := bytes.Repeat([]byte("k"), MaxRequestBytes)
	for _, tc := range []struct {
		name, method string
		body         []byte
		grpc         codes.Code
		code, field  string
	}{
		{"not a message", "Record", []byte{0xff, 0xff, 0xff}, codes.InvalidArgument, ledger.CodeMalformed, ""},
		{"truncated leg", "Record", append(rawRecord("market-01", "trunc-1"), 0x1a, 0x10, 0x0a), codes.InvalidArgument, ledger.CodeMalformed, "legs[0]"},
		{"scope not UTF-8", "Record", rawRecord("market-\xff", "utf-1", good...), codes.InvalidArgument, ledger.CodeMalformed, "scope"},
		{"key not UTF-8", "Record", rawRecord("market-01", "utf-\xc3", good...), codes.InvalidArgument, ledger.CodeMalformed, "key"},
		{"account not UTF-8", "Record", rawRecord("market-01", "utf-3", rawLeg("platform:mint", econpb.Side_SIDE_DEBIT, 5), rawLeg("u1:\xe2\x82", econpb.Side_SIDE_CREDIT, 5)),
			codes.InvalidArgument, ledger.CodeMalformed, "legs[1].account"},
		{"too large", "Record", rawRecord("market-01", string(big), good...), codes.ResourceExhausted, CodeTooLarge, ""},
		{"Balances account not UTF-8", "Balances", append(str(1, "u1:spendable"), str(1, "\xff")...), codes.InvalidArgument, ledger.CodeMalformed, "accounts[1]"},
		{"Pending after not UTF-8", "Pending", str(1, "\x80"), codes.InvalidArgument, ledger.CodeMalformed, "after"},
		{"Recover garbage", "Recover", []byte{0x0a, 0x05, 'a'}, codes.InvalidArgument, ledger.CodeMalformed, "session_id"},
		{"Sweep garbage", "Sweep", []byte{0x08}, codes.InvalidArgument, ledger.CodeMalformed, "field 1"},
		{"Health garbage", "Health", []byte{0x07}, codes.InvalidArgument, ledger.CodeMalformed, ""},
		{"Members garbage", "Members", []byte{0xff}, codes.InvalidArgument, ledger.CodeMalformed, ""},
	} {
		_, err := callRaw(ctx, cc, tc.method, tc.body)
		code, field := errorInfo(err)
		if status.Code(err) != tc.grpc || code != tc.code || field != tc.field {
			t.Errorf("%s: got %v (code %q, field %q); want %v %q field %q", tc.name, err, code, field, tc.grpc, tc.code, tc.field)
		}
		// The Go client reads the same: typed, final.
		if re := errorFromStatus(err, "econ-a"); !errors.Is(re, ledger.ErrMalformed) && !errors.Is(re, ErrTooLarge) {
			t.Errorf("%s: client error %v matches neither OP.MALFORMED nor OP.TOO_LARGE", tc.name, re)
		} else if retry, _ := retryable(re); retry {
			t.Errorf("%s: the Go client would retry %v", tc.name, re)
		}
	}
	checkNothingWritten(t, store, []string{"trunc-1", "utf-1", "utf-3"})

	// Garbage does not run an operator call: an accepted movement's
	// session stays open through a Settle whose bytes are not a
	// SettleRequest, and a real one settles it.
	resp, err := callRaw(ctx, cc, "Record", rawRecord("market-01", "fund-1", good...))
	if err != nil {
		t.Fatal(err)
	}
	var rec econpb.RecordResponse
	if err := proto.Unmarshal(resp, &rec); err != nil || rec.GetOutcome().GetStatus() != econpb.Status_STATUS_ACCEPTED {
		t.Fatalf("good record: %v, %v", &rec, err)
	}
	if _, err := callRaw(ctx, cc, "Settle", []byte{0x0a}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Settle on garbage: %v, want InvalidArgument", err)
	}
	if us, err := store.ListUnsettled(ctx, 0); err != nil || len(us) != 1 {
		t.Fatalf("after a garbage Settle: unsettled %v, %v; want the one session still open", us, err)
	}
	if _, err := callRaw(ctx, cc, "Settle", nil); err != nil {
		t.Fatal(err)
	}
	if us, err := store.ListUnsettled(ctx, 0); err != nil || len(us) != 0 {
		t.Fatalf("after Settle: unsettled %v, %v", us, err)
	}

	// Above gRPC's own receive limit the message is not read: gRPC
	// answers, without a code (documented).
	huge := rawRecord("market-01", strings.Repeat("k", MaxReceiveBytes), good...)
	_, err = callRaw(ctx, cc, "Record", huge)
	if code, _ := errorInfo(err); status.Code(err) != codes.ResourceExhausted || code != "" {
		t.Fatalf("over MaxReceiveBytes: %v (code %q); want gRPC's RESOURCE_EXHAUSTED", err, code)
	}
}

// TestServerJudgesARequestBeforeRoutingIt: an invalid request for a scope
// another node owns is answered OP.MALFORMED by the node called, not
// misrouted (the caller would carry the bad request to the owner only to be
// refused there), and writes nothing anywhere.
func TestServerJudgesARequestBeforeRoutingIt(t *testing.T) {
	prefix := testPrefix(t)
	store, _ := newSQLite(t)
	a := serveNode(t, prefix, "econ-a", store, Config{}, nil)
	b := serveNode(t, prefix, "econ-b", store, Config{}, nil)
	waitView(t, []string{"econ-a", "econ-b"}, a.Node, b.Node)
	scope := scopeOwnedBy(t, router(t, "econ-a", "econ-b"), "econ-b")
	ctx := testCtx(t)

	unbalanced := &econpb.RecordRequest{Scope: scope, Key: "nonowner-1", Legs: []*econpb.Leg{
		debitPB("platform:mint", 5), creditPB(ledger.Spendable("u1"), 4),
	}}
	noSide := &econpb.RecordRequest{Scope: scope, Key: "nonowner-2", Legs: []*econpb.Leg{
		{Account: "platform:mint", Amount: 5}, creditPB(ledger.Spendable("u1"), 5),
	}}
	for _, tc := range []struct {
		name        string
		body        []byte
		code, field string
	}{
		{"unbalanced", marshalPB(t, unbalanced), ledger.CodeUnbalanced, "legs"},
		{"no side", marshalPB(t, noSide), ledger.CodeMalformed, "legs[0].side"},
		{"account not UTF-8", rawRecord(scope, "nonowner-3", rawLeg("platform:mint", econpb.Side_SIDE_DEBIT, 5), rawLeg("\xff", econpb.Side_SIDE_CREDIT, 5)), ledger.CodeMalformed, "legs[1].account"},
	} {
		reply, err := callRaw(ctx, rawConn(t, a.addr), "Record", tc.body)
		if err == nil {
			var resp econpb.RecordResponse
			_ = proto.Unmarshal(reply, &resp)
			t.Errorf("%s at the non-owner: answered %v; want %s", tc.name, &resp, tc.code)
			continue
		}
		if code, field := errorInfo(err); status.Code(err) != codes.InvalidArgument || code != tc.code || field != tc.field {
			t.Errorf("%s at the non-owner: %v (code %q, field %q); want %s field %q", tc.name, err, code, field, tc.code, tc.field)
		}
	}
	checkNothingWritten(t, store, []string{"nonowner-1", "nonowner-2", "nonowner-3"})
	// The same valid request is misrouted: the node called is not the owner.
	resp, err := rawStub(t, a.addr).Record(ctx, &econpb.RecordRequest{Scope: scope, Key: "nonowner-4", Legs: goodRecord("").Legs})
	if err != nil || resp.GetMisroute().GetOwner() != "econ-b" {
		t.Fatalf("valid request at the non-owner: %v, %v; want a misroute to econ-b", resp, err)
	}
}

// FuzzRequestCodec: whatever bytes arrive, the server's codec never fails
// and never panics; bytes proto decodes become the same message with no
// decode mark (unless the caller sent the mark's field itself); bytes it
// does not decode become an empty message whose mark is an OP.MALFORMED
// *RequestError, answered InvalidArgument.
func FuzzRequestCodec(f *testing.F) {
	legs := [][]byte{rawLeg("platform:mint", econpb.Side_SIDE_DEBIT, 5), rawLeg("u1:\xe2\x82", econpb.Side_SIDE_CREDIT, 5)}
	for i, b := range [][]byte{
		rawRecord("market-01", "k-1", legs...),
		rawRecord("market-\xff", "k-1"),
		append(rawRecord("market-01", "k-1"), 0x1a, 0x10, 0x0a),
		{0xff, 0xff, 0xff},
		append(str(1, "u1:spendable"), str(1, "\xff")...),
		{0x0a, 0x05, 'a'},
		marshalPB(f, goodRecord("k-2")),
		protowire.AppendBytes(protowire.AppendTag(nil, markField, protowire.BytesType), str(markCode, "X")),
	} {
		f.Add(byte(i), b)
	}
	kinds := []func() proto.Message{
		func() proto.Message { return &econpb.RecordRequest{} },
		func() proto.Message { return &econpb.BalancesRequest{} },
		func() proto.Message { return &econpb.PendingRequest{} },
		func() proto.Message { return &econpb.RecoverRequest{} },
		func() proto.Message { return &econpb.SettleRequest{} },
	}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		m := kinds[int(kind)%len(kinds)]()
		if err := (requestCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, m); err != nil {
			t.Fatalf("Unmarshal failed: %v", err)
		}
		want := kinds[int(kind)%len(kinds)]()
		perr := proto.Unmarshal(data, want)
		derr := decodeFailure(m)
		if perr == nil {
			if !proto.Equal(m, want) {
				t.Fatalf("decoded %v, proto decodes %v", m, want)
			}
			if derr != nil && !bytes.Contains(data, protowire.AppendTag(nil, markField, protowire.BytesType)) {
				t.Fatalf("a message proto decodes carries a mark: %v", derr)
			}
			return
		}
		var rerr *RequestError
		if !errors.As(derr, &rerr) || !errors.Is(derr, ledger.ErrMalformed) {
			t.Fatalf("undecodable bytes (%v): mark %v, want an OP.MALFORMED *RequestError", perr, derr)
		}
		if st := StatusOf(derr); st.Code() != codes.InvalidArgument {
			t.Fatalf("mark answered %v", st)
		}
		if !proto.Equal(m, withUnknown(kinds[int(kind)%len(kinds)](), m.ProtoReflect().GetUnknown())) {
			t.Fatalf("an undecodable request keeps fields: %v", m)
		}
	})
}

func withUnknown(m proto.Message, raw []byte) proto.Message {
	m.ProtoReflect().SetUnknown(raw)
	return m
}
