package zonecli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/shardwise/shardwise/zone/zonehost"
)

// status prints what the host reports. Its methods run on the host's
// goroutine, which is also the command's.
type status struct {
	out   io.Writer
	name  string
	every uint64 // ticks between status lines: about a second's worth
	start time.Time

	ticks     uint64
	last      zonehost.HostReport
	regions   int
	version   uint64 // the table version of the last line that named one
	maxGhosts int
	dashboard string // where the dashboard is served, if it is
}

func (s *status) ready(r zonehost.HostReady) {
	s.regions = r.Regions
	s.version = r.TableVersion
	s.start = time.Now()
	metrics := ""
	if r.MetricsAddr != "" {
		metrics = ", metrics http://" + r.MetricsAddr + "/metrics"
	}
	if r.GatewayAddr != "" {
		metrics += ", gateway ws://" + r.GatewayAddr + "/ws (browser client http://" + r.GatewayAddr + "/)"
	}
	if s.dashboard != "" {
		metrics += ", dashboard http://" + s.dashboard + "/"
	}
	fmt.Fprintf(s.out, "%s: node %d, link %s%s, table version %d: owns %d of %d regions; peers connected: %s; missing: %s\n",
		r.Name, r.Node, r.LinkAddr, metrics, r.TableVersion, r.OwnedRegions, r.Regions, list(r.Connected), list(r.Missing))
}

func (s *status) tick(r zonehost.HostReport) {
	s.ticks++
	s.last = r
	s.maxGhosts = max(s.maxGhosts, r.RenderGhosts)
	if r.TableVersion != s.version {
		s.version = r.TableVersion
		fmt.Fprintf(s.out, "%s: table version %d at tick %d: owns %d of %d regions\n", s.name, r.TableVersion, r.Tick, r.OwnedRegions, s.regions)
	}
	if s.ticks%s.every == 0 {
		h := r.Handoff
		fmt.Fprintf(s.out, "%s  tick %d  entities %d  simulated %d  frozen %d  regions %d  ghosts %d  peers %d/%d  batches %d  refused %d  handoffs sent %d acked %d adopted %d\n",
			s.name, r.Tick, r.Entities, r.Simulated, r.Frozen, r.OwnedRegions, r.RenderGhosts, r.Connected, r.Peers,
			r.Cluster.Batches, r.Cluster.Refused, h.Sent, h.Acked, h.Adopted)
	}
}

func (s *status) summary() {
	r := s.last
	h := r.Handoff
	fmt.Fprintf(s.out, "%s: ran %d ticks in %s: entities %d (simulated %d, frozen %d), owned regions %d of %d (table version %d), "+
		"render ghosts %d (most %d), link batches %d (entries %d, snapshots %d), subscribes %d, "+
		"intents sent %d, refused %d, send errors %d, "+
		"handoffs sent %d, acked %d, refused %d, aborted %d, adopted %d, stale %d\n",
		s.name, s.ticks, time.Since(s.start).Round(time.Millisecond), r.Entities, r.Simulated, r.Frozen, r.OwnedRegions, s.regions, r.TableVersion,
		r.RenderGhosts, s.maxGhosts, r.Cluster.Batches, r.Cluster.Entries, r.Cluster.Snapshots, r.Cluster.Subscribes,
		r.Cluster.IntentsSent, r.Cluster.Refused, r.Cluster.SendErrors,
		h.Sent, h.Acked, h.Refused, h.Aborted, h.Adopted, h.Stale)
}

func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ", ")
}
