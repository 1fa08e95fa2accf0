package main

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/internal/testenv"
	"github.com/shardwise/shardwise/ledger"
	"github.com/shardwise/shardwise/proto/econpb"
)

// bytesCodec puts a call's bytes on the wire as they are.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }
func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// TestEconProcessAnswersBadBytesAndListsMembers: a "shardwise econ"
// process answers bytes that are not a request, a scope that is not UTF-8
// and a message over 4 MiB with the service's ErrorInfo (issue 27
// sequence 3), and its Members call lists it with its address.
func TestEconProcessAnswersBadBytesAndListsMembers(t *testing.T) {
	eps, _ := etcdForCmdTest(t)
	p := startShardwise(t, "econ", "--endpoints", eps, "--name", "econ-a", "--store", "sqlite://"+filepath.Join(t.TempDir(), "econ.db"), "--ttl", "1s")
	var addr string
	testenv.PollUntil(t, 30*time.Second, "econ-a's ready line", func() bool {
		if p.exited() {
			t.Fatalf("econ-a exited: %v\n%s", p.err, p.out.String())
		}
		m := econReadyRE.FindStringSubmatch(p.out.String())
		if m != nil {
			addr = m[2]
		}
		return m != nil
	})
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(bytesCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := t.Context()
	call := func(method string, body []byte) ([]byte, error) {
		var reply []byte
		err := cc.Invoke(ctx, "/shardwise.econ.v1.Economy/"+method, &body, &reply)
		return reply, err
	}
	info := func(err error) (string, string) {
		for _, d := range status.Convert(err).Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok && i.Domain == econ.ErrorDomain {
				return i.Reason, i.Metadata["field"]
			}
		}
		return "", ""
	}
	for _, tc := range []struct {
		name        string
		body        []byte
		grpc        codes.Code
		code, field string
	}{
		{"not a message", []byte{0xff, 0xff}, codes.InvalidArgument, ledger.CodeMalformed, ""},
		{"scope not UTF-8", []byte{0x0a, 0x02, 's', 0xff}, codes.InvalidArgument, ledger.CodeMalformed, "scope"},
		{"too large", append([]byte{0x12, 0x81, 0x80, 0x80, 0x02}, bytes.Repeat([]byte("k"), 4<<20+1)...), codes.ResourceExhausted, econ.CodeTooLarge, ""},
	} {
		_, err := call("Record", tc.body)
		if code, field := info(err); status.Code(err) != tc.grpc || code != tc.code || field != tc.field {
			t.Errorf("%s: %v (code %q, field %q); want %v %s field %q", tc.name, err, code, field, tc.grpc, tc.code, tc.field)
		}
	}

	reply, err := call("Members", nil)
	var members econpb.MembersResponse
	if err != nil || proto.Unmarshal(reply, &members) != nil {
		t.Fatalf("Members: %v", err)
	}
	if ms := members.GetMembers(); len(ms) != 1 || ms[0].GetName() != "econ-a" || ms[0].GetAddr() != addr || members.GetNode() != "econ-a" {
		t.Fatalf("Members: %v; want econ-a at %s", &members, addr)
	}
	if err := p.stop(30 * time.Second); err != nil {
		t.Fatalf("econ-a did not stop cleanly: %v", err)
	}
}
