package zone

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/shardwise/shardwise/account"
	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/handoff"
	"github.com/shardwise/shardwise/zone/internal/wire"
)

var ckptSamples = []checkpointMsg{
	{Seq: 1},
	{Fence: wire.Fence{Node: 3, Lease: -7, Table: 9}, Region: 15, Seq: 1 << 40, Full: true, Tick: 1 << 33,
		Gone: []uint64{1, 1 << 63},
		State: []handoff.RawSnapshot{rawSnapshot(handoff.Snapshot{Entity: 5, Epoch: 2, Table: 3,
			Components: []handoff.Component{{Name: "a", Data: []byte{1, 2}}, {Name: "b"}}})}},
}

func rawSnapshot(s handoff.Snapshot) handoff.RawSnapshot {
	return handoff.RawSnapshot{Entity: s.Entity, Epoch: s.Epoch, Bytes: s.Append(nil)}
}

var querySamples = []adoptQuery{
	{Dead: []string{"zone-1"}},
	{Fence: wire.Fence{Node: 1, Lease: 1 << 62, Table: 4}, Round: 7, Table: 4, Dead: []string{"a", "zone-2"},
		Entries: []queryEntry{{Entity: 9, Tick: 100}, {Entity: 1 << 63}}},
}

var answerSamples = []adoptAnswer{{}, {Fence: wire.Fence{Node: 2}, Round: 3, Taken: []uint64{4, 5}}}

// FuzzDecodeCheckpoint and the two below: the checkpoint kinds come from
// peers' bytes. No bytes make a decoder panic; what one accepts encodes
// back to the same bytes; what it refuses is ZONE.MALFORMED_INPUT.
func FuzzDecodeCheckpoint(f *testing.F) {
	for _, m := range ckptSamples {
		f.Add(m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeCheckpoint(b, nil)
		if err != nil {
			checkMalformedInput(t, err)
			return
		}
		if got := m.Append(nil); !bytes.Equal(got, b) {
			t.Fatalf("decoded %x into %+v, which encodes to %x", b, m, got)
		}
	})
}

func FuzzDecodeAdoptQuery(f *testing.F) {
	for _, m := range querySamples {
		f.Add(m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeAdoptQuery(b)
		if err != nil {
			checkMalformedInput(t, err)
			return
		}
		if got := m.Append(nil); !bytes.Equal(got, b) {
			t.Fatalf("decoded %x into %+v, which encodes to %x", b, m, got)
		}
	})
}

func FuzzDecodeAdoptAnswer(f *testing.F) {
	for _, m := range answerSamples {
		f.Add(m.Append(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeAdoptAnswer(b)
		if err != nil {
			checkMalformedInput(t, err)
			return
		}
		if got := m.Append(nil); !bytes.Equal(got, b) {
			t.Fatalf("decoded %x into %+v, which encodes to %x", b, m, got)
		}
	})
}

func checkMalformedInput(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrMalformedInput) || errcode.Of(err) != CodeMalformedInput {
		t.Fatalf("error %v (code %q), want %s", err, errcode.Of(err), CodeMalformedInput)
	}
}

// TestDecodeCheckpointErrors: each way a checkpoint's bytes can be wrong
// is refused with ZONE.MALFORMED_INPUT naming the field.
func TestDecodeCheckpointErrors(t *testing.T) {
	good := ckptSamples[1].Append(nil)
	zeroSeq := checkpointMsg{Seq: 1}.Append(nil)
	zeroSeq[len(zeroSeq)-5] = 0 // Seq
	badFull := checkpointMsg{Seq: 1}.Append(nil)
	badFull[len(badFull)-4] = 2 // Full
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "Checkpoint"},
		{"wrong version", append([]byte{9}, good[1:]...), "Checkpoint"},
		{"truncated", good[:len(good)-3], "Checkpoint.State"},
		{"zero seq", zeroSeq, "Checkpoint.Seq"},
		{"full not a bool", badFull, "Checkpoint.Full"},
		{"trailing byte", append(bytes.Clone(good), 0), "trailing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeCheckpoint(c.in, nil)
			if !errors.Is(err, ErrMalformedInput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decodeCheckpoint: %v, want %s naming %q", err, CodeMalformedInput, c.want)
			}
		})
	}
	for _, m := range ckptSamples {
		got, err := decodeCheckpoint(m.Append(nil), nil)
		if err != nil || !bytes.Equal(got.Append(nil), m.Append(nil)) {
			t.Fatalf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	if _, err := decodeAdoptQuery(adoptQuery{Dead: []string{"Not A Name"}}.Append(nil)); !errors.Is(err, ErrMalformedInput) || !strings.Contains(err.Error(), "AdoptQuery.Dead[0]") {
		t.Fatalf("a query naming no node: %v", err)
	}
}

// A standby finds a record's player (recordAccount) in its encoded bytes.
func TestRecordAccountReadsTheEncodedRecord(t *testing.T) {
	owner := func(o Owner) []byte { return FixedCodec[Owner]().Append(nil, &o) }
	rec := func(comps ...handoff.Component) handoff.RawSnapshot {
		return rawSnapshot(handoff.Snapshot{Entity: 9, Epoch: 3, Table: 2, Components: comps})
	}
	for _, c := range []struct {
		name string
		rec  handoff.RawSnapshot
		want account.ID
	}{
		{"a client player", rec(handoff.Component{Name: "a", Data: []byte{1}}, handoff.Component{Name: ownerName, Data: owner(Owner{Account: 42, Session: 7})}, handoff.Component{Name: "zz"}), 42},
		{"no session", rec(handoff.Component{Name: ownerName, Data: owner(Owner{Account: 42})}), 0},
		{"no owner", rec(handoff.Component{Name: "a", Data: []byte{1}}), 0},
		{"no components", rec(), 0},
	} {
		if got := recordAccount(c.rec); got != c.want {
			t.Errorf("%s: recordAccount = %d, want %d", c.name, got, c.want)
		}
	}
}

// The State of a checkpoint is a handoff.Transfer, byte for byte, however
// the sender builds it: the format is the one checkpoints had when they
// carried decoded snapshots.
func TestCheckpointStateIsATransfer(t *testing.T) {
	snaps := []handoff.Snapshot{
		{Entity: 5, Epoch: 2, Table: 3, Components: []handoff.Component{{Name: "a", Data: []byte{1, 2}}, {Name: "b"}}},
		{Entity: 1 << 62, Epoch: 300, Components: []handoff.Component{{Name: "zone.handoff.at", Data: make([]byte, 8)}}},
	}
	m := checkpointMsg{Fence: wire.Fence{Node: 2, Lease: 9, Table: 4}, Region: 3, Seq: 7, Tick: 40, Gone: []uint64{8}}
	head := m.Append(nil)
	head = head[:len(head)-1] // State's empty span
	tr := handoff.Transfer{Entities: snaps}.Append(nil)
	want := append(binary.AppendUvarint(head, uint64(len(tr))), tr...)
	for _, s := range snaps {
		m.State = append(m.State, rawSnapshot(s))
	}
	if got := m.Append(nil); !bytes.Equal(got, want) {
		t.Fatalf("checkpoint encodes as\n%x, want\n%x", got, want)
	}
}
