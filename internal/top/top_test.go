package top_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/coord"
	"github.com/shardwise/shardwise/internal/top"
	"github.com/shardwise/shardwise/internal/top/toptest"
)

// TestTopScrapesRealNodes: a zone node (zonehost.Host with a metrics address)
// and an economy node (econ.Host with one), both in one embedded etcd;
// top finds both through their member records, scrapes them and prints
// each one's numbers: the zone's tick and its 16 wanderers, the economy
// node ready with the movements recorded, settled and netted.
func TestTopScrapesRealNodes(t *testing.T) {
	c := toptest.StartCluster(t)
	ms, err := c.MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	snap := top.Take(t.Context(), &http.Client{Timeout: 10 * time.Second}, ms, time.Now())
	var out bytes.Buffer
	if _, err := snap.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	t.Logf("top:\n%s", text)
	for _, r := range snap.Rows {
		if r.Err != nil {
			t.Errorf("%s: %v", r.Name, r.Err)
		}
	}
	// The zone row: a tick, 16 simulated wanderers, 0 frozen, 16 regions,
	// no handoffs, no gateway (sessions "-").
	if !regexp.MustCompile(`(?m)^\s*zone-a\s+\d+\s+16\s+0\s+16\s+0\s+0/0/0\s+-\s+0/0\s*$`).MatchString(text) {
		t.Errorf("no zone-a row with 16 simulated in 16 regions:\n%s", text)
	}
	// The econ row: ready, a view of 1, 5 movements accepted, 0 rejected,
	// the one session settled in one posting: ratio 5.0.
	if !regexp.MustCompile(`(?m)^\s*econ-a\s+yes\s+1\s+5\s+0\s+1\s+1\s+5\.0\s+0\s*$`).MatchString(text) {
		t.Errorf("no econ-a row with 5 movements netted into 1 posting:\n%s", text)
	}
	if strings.Contains(text, "no metrics address") {
		t.Errorf("a member publishes no metrics address:\n%s", text)
	}
}

// TestTopShowsAFailedScrape: a node whose metrics address does not answer
// is a row with its error; the others are still shown.
func TestTopShowsAFailedScrape(t *testing.T) {
	ms := []coord.Member{
		{Name: "zone-z", Role: "zone", Addrs: map[string]string{"metrics": "127.0.0.1:1"}},
		{Name: "econ-q", Role: "econ"},
	}
	snap := top.Take(t.Context(), &http.Client{Timeout: 5 * time.Second}, ms, time.Unix(0, 0))
	var out bytes.Buffer
	if _, err := snap.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, "zone-z") || !strings.Contains(text, "scrape failed:") {
		t.Errorf("no failed row for zone-z:\n%s", text)
	}
	if !strings.Contains(text, "no metrics address published: econ-q") {
		t.Errorf("econ-q, which publishes no metrics address, is not named:\n%s", text)
	}
}
