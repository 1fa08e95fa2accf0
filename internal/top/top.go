package top

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/shardwise/shardwise/coord"
)

// MetricsAddrKey is the key of a node's metrics address in
// coord.Member.Addrs (zone and econ nodes publish it under this key).
const MetricsAddrKey = "metrics"

// Target is one node to scrape.
type Target struct {
	Name, Role string
	// Addr is host:port; the metrics are at http://Addr/metrics.
	Addr string
}

// Targets returns the members that publish a metrics address, sorted by
// role then name, and the names of those that publish none.
func Targets(ms []coord.Member) (targets []Target, without []string) {
	for _, m := range ms {
		if a := m.Addrs[MetricsAddrKey]; a != "" {
			targets = append(targets, Target{Name: m.Name, Role: m.Role, Addr: a})
		} else {
			without = append(without, m.Name)
		}
	}
	slices.SortFunc(targets, func(a, b Target) int {
		return strings.Compare(a.Role+"\x00"+a.Name, b.Role+"\x00"+b.Name)
	})
	slices.Sort(without)
	return targets, without
}

// Families are one scrape's metric families by name.
type Families map[string]*dto.MetricFamily

// Value is the sum of the samples of the counter, gauge or untyped family
// name whose labels include every pair of match ("event", "sent", …),
// and whether the node exports the family at all: a family with no
// matching sample is 0 (a counter by result that never counted
// "rejected" has not rejected anything).
func (f Families) Value(name string, match ...string) (float64, bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	sum := 0.0
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, true
}

func hasLabels(m *dto.Metric, match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		ok := false
		for _, l := range m.GetLabel() {
			if l.GetName() == match[i] && l.GetValue() == match[i+1] {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// maxBody bounds one scrape: a node's page is a few tens of kilobytes.
const maxBody = 16 << 20

// Scrape reads http://addr/metrics (the Prometheus text format).
func Scrape(ctx context.Context, c *http.Client, addr string) (Families, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET http://%s/metrics: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("http://%s/metrics: %w", addr, err)
	}
	return Families(fams), nil
}

// Row is one node's scrape: its families, or the error that kept them.
type Row struct {
	Target
	Families Families
	Err      error
}

// Snapshot is one round of scrapes.
type Snapshot struct {
	At   time.Time
	Rows []Row
	// Without names the members that publish no metrics address.
	Without []string
}

// Collect scrapes every target at once, each bounded by ctx and the
// client's timeout, and returns when all have answered or failed. The
// rows keep the targets' order.
func Collect(ctx context.Context, c *http.Client, targets []Target) []Row {
	rows := make([]Row, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			fams, err := Scrape(ctx, c, t.Addr)
			rows[i] = Row{Target: t, Families: fams, Err: err}
		})
	}
	wg.Wait()
	return rows
}

// Roles whose numbers WriteTo knows (coord member roles).
const (
	RoleZone = "zone"
	RoleEcon = "econ"
)

// WriteTo writes the snapshot as tables: zone nodes, economy nodes, then
// any other member that serves metrics, and the members that serve none.
// A number a node does not export is "-".
func (s Snapshot) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	byRole := map[string][]Row{}
	for _, r := range s.Rows {
		byRole[r.Role] = append(byRole[r.Role], r)
	}
	fmt.Fprintf(cw, "shardwise top  %s  %d node(s) scraped\n", s.At.UTC().Format(time.RFC3339), len(s.Rows))
	if rows := byRole[RoleZone]; len(rows) > 0 {
		fmt.Fprintln(cw)
		writeTable(cw, []string{"ZONE", "TICK", "SIMULATED", "FROZEN", "REGIONS", "GHOSTS", "HANDOFFS S/A/AD", "SESSIONS", "LINK FRAMES OUT/IN"}, rows, zoneCells)
	}
	if rows := byRole[RoleEcon]; len(rows) > 0 {
		fmt.Fprintln(cw)
		writeTable(cw, []string{"ECON", "READY", "VIEW", "MOVEMENTS", "REJECTED", "SETTLED", "POSTINGS", "RATIO", "SWEPT"}, rows, econCells)
	}
	var others []Row
	for _, role := range slices.Sorted(maps.Keys(byRole)) {
		if role != RoleZone && role != RoleEcon {
			others = append(others, byRole[role]...)
		}
	}
	if len(others) > 0 {
		fmt.Fprintln(cw)
		writeTable(cw, []string{"NODE", "ROLE", "METRICS", "FAMILIES"}, others, func(r Row) []string {
			return []string{r.Role, r.Addr, strconv.Itoa(len(r.Families))}
		})
	}
	if len(s.Without) > 0 {
		fmt.Fprintf(cw, "\nno metrics address published: %s\n", strings.Join(s.Without, ", "))
	}
	return cw.n, cw.err
}

// writeTable writes one section; a row whose scrape failed shows its error
// in place of its numbers.
func writeTable(w io.Writer, header []string, rows []Row, cells func(Row) []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(tw, "%s\tscrape failed: %v\n", r.Name, r.Err)
			continue
		}
		fmt.Fprintln(tw, r.Name+"\t"+strings.Join(cells(r), "\t")+"\t")
	}
	_ = tw.Flush()
}

// Metric names the tables read (docs/metrics.md describes them).
const (
	zoneTick         = "shardwise_zone_tick"
	zoneEntities     = "shardwise_zone_entities"
	zoneOwnedRegions = "shardwise_zone_owned_regions"
	zoneRenderGhosts = "shardwise_zone_render_ghosts"
	zoneHandoffs     = "shardwise_zone_handoffs_total"
	gatewaySessions  = "shardwise_gateway_sessions"
	linkSent         = "shardwise_link_sent_total"
	linkReceived     = "shardwise_link_received_total"
	econReady        = "shardwise_econ_ready"
	econViewMembers  = "shardwise_econ_view_members"
	econRecords      = "shardwise_econ_records_total"
	econSettled      = "shardwise_econ_settled_sessions_total"
	econPostings     = "shardwise_econ_settle_postings_total"
	econNetted       = "shardwise_econ_settled_movements_total"
	econSwept        = "shardwise_econ_swept_orphans_total"
)

// Names are the metric names WriteTo reads, for the check that
// docs/metrics.md documents every one.
func Names() []string {
	return []string{zoneTick, zoneEntities, zoneOwnedRegions, zoneRenderGhosts, zoneHandoffs, gatewaySessions,
		linkSent, linkReceived, econReady, econViewMembers, econRecords, econSettled, econPostings, econNetted, econSwept}
}

func zoneCells(r Row) []string {
	f := r.Families
	num := func(name string, match ...string) string { return count(f.Value(name, match...)) }
	handoffs := num(zoneHandoffs, "event", "sent") + "/" + num(zoneHandoffs, "event", "acked") + "/" + num(zoneHandoffs, "event", "adopted")
	return []string{
		num(zoneTick), num(zoneEntities, "state", "simulated"), num(zoneEntities, "state", "frozen"),
		num(zoneOwnedRegions), num(zoneRenderGhosts), handoffs, num(gatewaySessions),
		linkFrames(f, linkSent) + "/" + linkFrames(f, linkReceived),
	}
}

// linkFrames is a link counter summed over peers and streams. The link's
// counters have a series per peer, so a node with no peer yet exports
// none: 0, not "-".
func linkFrames(f Families, name string) string {
	v, _ := f.Value(name)
	return count(v, true)
}

func econCells(r Row) []string {
	f := r.Families
	num := func(name string, match ...string) string { return count(f.Value(name, match...)) }
	ready := "-"
	if v, ok := f.Value(econReady); ok {
		ready = "no"
		if v == 1 {
			ready = "yes"
		}
	}
	ratio := "-"
	postings, okP := f.Value(econPostings)
	netted, okN := f.Value(econNetted)
	if okP && okN && postings > 0 {
		ratio = strconv.FormatFloat(netted/postings, 'f', 1, 64)
	}
	return []string{
		ready, num(econViewMembers), num(econRecords, "result", "accepted"), num(econRecords, "result", "rejected"),
		num(econSettled), num(econPostings), ratio, num(econSwept),
	}
}

// count prints a counter or gauge: an integer as one, else two decimals.
func count(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// Take is one snapshot of the members: the targets among them scraped
// at once, stamped with now.
func Take(ctx context.Context, c *http.Client, ms []coord.Member, now time.Time) Snapshot {
	targets, without := Targets(ms)
	return Snapshot{At: now, Rows: Collect(ctx, c, targets), Without: without}
}
