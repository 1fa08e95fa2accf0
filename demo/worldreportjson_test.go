package demo

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/zone"
)

// snakeCase is the one key style of the JSON report.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// dataMaps are the report's objects keyed by data, not by field: error
// and close codes, accounts, goods.
var dataMaps = map[string]bool{".bots.errors": true, ".bots.closes": true, ".bots.goods": true, ".audit.pending": true}

// walkJSON calls visit for every value of v (decoded JSON) with its path,
// and key for every object key.
func walkJSON(path string, v any, visit func(path string, v any), key func(path, k string)) {
	visit(path, v)
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			key(path, k)
			walkJSON(path+"."+k, e, visit, key)
		}
	case []any:
		for i, e := range v {
			walkJSON(path+"["+strconv.Itoa(i)+"]", e, visit, key)
		}
	}
}

// checkReportJSON decodes the report's JSON and checks its shape: "ok"
// present and equal to OK, every key snake_case, no null anywhere (empty
// lists are [], empty maps {}), and the keys want present.
func checkReportJSON(t *testing.T, r WorldReport, want ...string) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if ok, present := doc["ok"].(bool); !present || ok != r.OK() {
		t.Errorf(`"ok" is %v (%T), want %v`, doc["ok"], doc["ok"], r.OK())
	}
	walkJSON("", doc, func(path string, v any) {
		if v == nil {
			t.Errorf("%s is null", path)
		}
	}, func(path, k string) {
		if !dataMaps[path] && !snakeCase.MatchString(k) {
			t.Errorf("%s has key %q, not snake_case", path, k)
		}
	})
	for _, k := range want {
		var v any = doc
		for _, part := range strings.Split(k, ".") {
			m, _ := v.(map[string]any)
			v = m[part]
		}
		if v == nil {
			t.Errorf("no %s in %s", k, b)
		}
	}
	return doc
}

// TestWorldReportJSON: the report as "shardwise demo --json" writes it,
// empty (every list nil) and full (every list and map filled, a failure).
func TestWorldReportJSON(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		doc := checkReportJSON(t, checked(goodReport()), "ok", "failures", "notes", "bot_errors", "bots.blink_log", "bots.trade_log",
			"bots.errors", "audit.unsettled", "audit.negative_wallets", "audit.pending", "audit.balances", "handoffs.ack_ticks",
			"funding_postings", "settle_postings", "ledger.postings", "economy.bought", "bots.purchases_unseen",
			"zone_kill.node", "zone_kill.regions", "zone_kill.standbys", "zone_kill.table_after_ns", "zone_kill.simulated_after_ns",
			"zone_kill.entities_before", "zone_kill.entities_after", "zone_kill.entities_same_id", "zone_kill.players_reconnected",
			"zone_kill.reconnected_after_ns", "zone_kill.players_back", "zone_kill.trades_after", "zone_kill.players_lost",
			"zone_kill.restores_players", "zone_kill.blinks", "zone_kill.blinks_noted", "zone_kill.players_from_store", "zones")
		if doc["ok"] != true {
			t.Errorf(`"ok" is %v for a good report`, doc["ok"])
		}
	})
	t.Run("full", func(t *testing.T) {
		r := goodReport()
		r.DoubleSimulated, r.DoubleExamples = 1, []string{"entity 7 on zone-1 and zone-2"}
		r.Bots.Errors, r.Bots.Closes = map[string]int{"GATEWAY.RATE_LIMITED": 1}, map[string]int{"status 1006": 2}
		r.Bots.BlinkLog = []sim.Blink{{Entity: 9, Visual: []byte{1}, Vanished: 3, Appeared: 4}}
		r.Bots.TradeLog = []sim.TradeMeeting{{Bot: 0, Partner: 1}}
		r.Audit = econ.AuditReport{HasSumEntries: true, Pending: map[string]int64{"player:1:coins": 5},
			Unsettled:       []netting.UnsettledSession{{SessionMeta: netting.SessionMeta{ID: "s", Scope: "player:1", NodeID: "econ-1"}, LastRecordedAt: time.Unix(0, 0).UTC()}},
			Balances:        []econ.AccountBalance{{Account: "player:1:coins", Balance: 5}},
			NegativeWallets: []string{"player:2:coins"}}
		r.Handoffs = zone.HandoffStats{Acked: 3, AckTicks: [zone.AckTickBuckets]int{0, 3}}
		r.ZoneKill.Regions, r.ZoneKill.Standbys = nil, nil // a kill with no figures yet: still [] in JSON
		r = checked(r)
		doc := checkReportJSON(t, r, "audit.sum_entries", "double_examples")
		if doc["ok"] != false {
			t.Errorf(`"ok" is %v for a failed report`, doc["ok"])
		}
		u := doc["audit"].(map[string]any)["unsettled"].([]any)[0].(map[string]any)
		if u["id"] != "s" || u["node"] != "econ-1" || u["last_recorded_at"] != "1970-01-01T00:00:00Z" {
			t.Errorf("unsettled session %v", u)
		}
	})
}

// TestWorldReportJSONViews: every field of the nested counters has its
// key in the report's JSON views, so that a field added to one of them
// cannot be left out of the report unnoticed.
func TestWorldReportJSONViews(t *testing.T) {
	for _, c := range []struct {
		src, view any
		folded    map[string]string // source field → the view's field holding it
	}{
		{zone.HandoffStats{}, handoffsJSON{}, nil},
		{sim.BotStats{}, botsJSON{}, nil},
		{econ.AuditReport{}, econ.AuditJSON[unsettledJSON]{}, map[string]string{"HasSumEntries": "SumEntries"}},
		{netting.LedgerProof{}, ledgerJSON{}, map[string]string{"Head": "HeadHash"}},
	} {
		src, view := reflect.TypeOf(c.src), reflect.TypeOf(c.view)
		for i := range src.NumField() {
			f := src.Field(i)
			name := f.Name
			if to, ok := c.folded[name]; ok {
				name = to
			}
			if _, ok := view.FieldByName(name); !ok {
				t.Errorf("%v.%s has no field in %v", src, f.Name, view)
			}
		}
	}
}
