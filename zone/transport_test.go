package zone_test

import (
	"errors"
	"testing"

	"github.com/shardwise/shardwise/errcode"
	"github.com/shardwise/shardwise/zone"
	"github.com/shardwise/shardwise/zone/zonesim"
)

// TestConfigTransportIsChecked: a transport of another node is refused
// naming Config.Transport.
func TestConfigTransportIsChecked(t *testing.T) {
	net := zonesim.NewNetwork(1, zonesim.Faults{})
	for _, tc := range []struct {
		name string
		cfg  zone.Config
	}{
		{"another node's", zone.Config{Name: "a", Transport: net.Endpoint("b")}},
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
