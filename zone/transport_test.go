package zone_test

import (
	"errors"
	"testing"
	"time"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/link"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestConfigTransportIsChecked: a transport of another node, or a
// transport and a link together, is refused naming Config.Transport.
func TestConfigTransportIsChecked(t *testing.T) {
	net := zonesim.NewNetwork(1, zonesim.Faults{})
	l := newTestLink(t, "a")
	for _, tc := range []struct {
		name string
		cfg  zone.Config
	}{
		{"another node's", zone.Config{Name: "a", Transport: net.Endpoint("b")}},
		{"with a link", zone.Config{Name: "a", Link: l, Transport: net.Endpoint("a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var ce *errcode.ConfigError
			if !errors.As(err, &ce) || ce.Field != "Config.Transport" {
				t.Fatalf("Validate = %v, want a ConfigError naming Config.Transport", err)
			}
		})
	}
	if err := (zone.Config{Name: "a", Transport: net.Endpoint("a")}).Validate(); err != nil {
		t.Fatalf("a node's own transport: %v", err)
	}
}

// TestLinkTransportCloseIsIdempotent: Close twice, and a Send after it
// is refused with ErrTransportClosed.
func TestLinkTransportCloseIsIdempotent(t *testing.T) {
	l := newTestLink(t, "a")
	tr := zone.NewLinkTransport(l)
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
