package zonelink_test

import (
	"errors"
	"testing"
	"time"

	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonelink"
)

// TestLinkTransportCloseIsIdempotent: Close twice, and a Send after it
// is refused with ErrTransportClosed.
func TestLinkTransportCloseIsIdempotent(t *testing.T) {
	l := newTestLink(t, "a")
	tr := zonelink.NewLinkTransport(l)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.Send("b", 1, nil); !errors.Is(err, zone.ErrTransportClosed) {
		t.Fatalf("Send after Close = %v, want ErrTransportClosed", err)
	}
}

// newTestLink is a link node named name (never served or dialed).
func newTestLink(t *testing.T, name string) *link.Node {
	t.Helper()
	ca, err := link.NewCA("transport-test", time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ca.Issue(name, time.Now().Add(-time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := nc.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	l, err := link.New(link.Config{Certificate: cert, ClusterCA: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
