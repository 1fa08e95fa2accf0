package demo

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/shardwise/shardwise/econ"
	"github.com/shardwise/shardwise/game"
	"github.com/shardwise/shardwise/netting"
	"github.com/shardwise/shardwise/sim"
	"github.com/shardwise/shardwise/zone"
)

// The JSON form of WorldReport ("shardwise demo --json"). Its nested
// counters (zone.HandoffStats, sim.BotStats, game.EconomyStats,
// econ.AuditReport, netting.LedgerProof) carry no JSON tags of their own,
// and some of them are marshalled elsewhere under other names (the
// dashboard's snapshot holds zone.HandoffStats as is), so the report
// writes them through the views below: one key style, snake_case, every
// list [] when empty, every map {} when empty. The audit's keys are those
// of "shardwise econ audit --json" (docs/protocol.md) but for its
// unsettled sessions, which that command keeps in their older spelling.

// MarshalJSON writes the report with "ok" (OK) first.
func (r WorldReport) MarshalJSON() ([]byte, error) {
	// plain is WorldReport without this method; its fields' own tags
	// apply, but for the ones the outer struct names again (the shallower
	// field wins in encoding/json).
	type plain WorldReport
	p := plain(r)
	p.Zones = orEmpty(p.Zones)
	p.DoubleExamples, p.InvariantExamples, p.PlayerMismatches = orEmpty(p.DoubleExamples), orEmpty(p.InvariantExamples), orEmpty(p.PlayerMismatches)
	p.BotErrors, p.RunErrors, p.Notes, p.Failures = orEmpty(p.BotErrors), orEmpty(p.RunErrors), orEmpty(p.Notes), orEmpty(p.Failures)
	p.ZoneKill.Regions, p.ZoneKill.Standbys = orEmpty(p.ZoneKill.Regions), orEmpty(p.ZoneKill.Standbys)
	return json.Marshal(struct {
		OK bool `json:"ok"`
		plain
		Handoffs handoffsJSON                  `json:"handoffs"`
		Bots     botsJSON                      `json:"bots"`
		Economy  economyJSON                   `json:"economy"`
		Audit    econ.AuditJSON[unsettledJSON] `json:"audit"`
		Ledger   ledgerJSON                    `json:"ledger"`
	}{
		OK: r.OK(), plain: p,
		Handoffs: newHandoffsJSON(r.Handoffs), Bots: newBotsJSON(r.Bots), Economy: economyJSON(r.Economy),
		Audit: newAuditJSON(r.Audit), Ledger: newLedgerJSON(r.Ledger),
	})
}

// orEmpty is s, or an empty slice for nil: JSON's [] rather than null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// orEmptyMap is m, or an empty map for nil: JSON's {} rather than null.
func orEmptyMap[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// handoffsJSON is zone.HandoffStats.
type handoffsJSON struct {
	Sent       int `json:"sent"`
	Acked      int `json:"acked"`
	Refused    int `json:"refused"`
	Aborted    int `json:"aborted"`
	Adopted    int `json:"adopted"`
	Companions int `json:"companions"`
	Asked      int `json:"asked"`
	Stale      int `json:"stale"`
	// AckTicks[k]: the handoffs acked k ticks after their send (the last
	// also counts every longer one).
	AckTicks []int `json:"ack_ticks"`
}

func newHandoffsJSON(s zone.HandoffStats) handoffsJSON {
	return handoffsJSON{Sent: s.Sent, Acked: s.Acked, Refused: s.Refused, Aborted: s.Aborted, Adopted: s.Adopted,
		Companions: s.Companions, Asked: s.Asked, Stale: s.Stale, AckTicks: slices.Clone(s.AckTicks[:])}
}

// botsJSON is sim.BotStats.
type botsJSON struct {
	Bots             int              `json:"bots"`
	Logins           int              `json:"logins"`
	Relogs           int              `json:"relogs"`
	Reconnects       int              `json:"reconnects"`
	LoginFailures    int              `json:"login_failures"`
	Resumed          int              `json:"resumed"`
	ResumeMisses     int              `json:"resume_misses"`
	SessionResumes   int              `json:"session_resumes"`
	ResumesRefused   int              `json:"resumes_refused"`
	Inputs           int              `json:"inputs"`
	Pings            int              `json:"pings"`
	Legs             int              `json:"legs"`
	LegTimeouts      int              `json:"leg_timeouts"`
	Attacks          int              `json:"attacks"`
	Heals            int              `json:"heals"`
	Errors           map[string]int   `json:"errors"`
	Closes           map[string]int   `json:"closes"`
	Batches          int              `json:"batches"`
	Blinks           int              `json:"blinks"`
	EdgeReturns      int              `json:"edge_returns"`
	OutOfOrder       int              `json:"out_of_order"`
	Bytes            int              `json:"bytes"`
	Leaks            int              `json:"leaks"`
	BlinkLog         []blinkJSON      `json:"blink_log"`
	Purchases        int              `json:"purchases"`
	PurchasesRefused int              `json:"purchases_refused"`
	PurchasesUnseen  int              `json:"purchases_unseen"`
	ShopMisses       int              `json:"shop_misses"`
	TradesCommitted  int              `json:"trades_committed"`
	TradesCancelled  int              `json:"trades_cancelled"`
	TradeTimeouts    int              `json:"trade_timeouts"`
	TradeSkips       int              `json:"trade_skips"`
	TradeLog         []tradeJSON      `json:"trade_log"`
	Purses           int              `json:"purses"`
	Coins            int64            `json:"coins"`
	Goods            map[string]int64 `json:"goods"`
	Done             int              `json:"done"`
}

// blinkJSON is a sim.Blink: an entity a client saw vanish and come back,
// with the server ticks of both and its visual payload (base64) before.
type blinkJSON struct {
	Entity   uint64 `json:"entity"`
	Visual   []byte `json:"visual"`
	Vanished uint64 `json:"vanished"`
	Appeared uint64 `json:"appeared"`
}

// tradeJSON is a sim.TradeMeeting.
type tradeJSON struct {
	Bot       int     `json:"bot"`
	Partner   int     `json:"partner"`
	At        posJSON `json:"at"`
	PartnerAt posJSON `json:"partner_at"`
}

// posJSON is a position in metres.
type posJSON struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	Z float64 `json:"z"`
}

func newBotsJSON(s sim.BotStats) botsJSON {
	b := botsJSON{
		Bots: s.Bots, Logins: s.Logins, Relogs: s.Relogs, Reconnects: s.Reconnects, LoginFailures: s.LoginFailures,
		Resumed: s.Resumed, ResumeMisses: s.ResumeMisses, SessionResumes: s.SessionResumes, ResumesRefused: s.ResumesRefused, Inputs: s.Inputs, Pings: s.Pings, Legs: s.Legs, LegTimeouts: s.LegTimeouts,
		Attacks: s.Attacks, Heals: s.Heals, Errors: maps.Clone(orEmptyMap(s.Errors)), Closes: maps.Clone(orEmptyMap(s.Closes)),
		Batches: s.Batches, Blinks: s.Blinks, EdgeReturns: s.EdgeReturns, OutOfOrder: s.OutOfOrder, Bytes: s.Bytes, Leaks: s.Leaks,
		BlinkLog:  []blinkJSON{},
		Purchases: s.Purchases, PurchasesRefused: s.PurchasesRefused, PurchasesUnseen: s.PurchasesUnseen, ShopMisses: s.ShopMisses,
		TradesCommitted: s.TradesCommitted, TradesCancelled: s.TradesCancelled, TradeTimeouts: s.TradeTimeouts, TradeSkips: s.TradeSkips,
		TradeLog: []tradeJSON{}, Purses: s.Purses, Coins: s.Coins, Goods: map[string]int64{}, Done: s.Done,
	}
	for _, bl := range s.BlinkLog {
		b.BlinkLog = append(b.BlinkLog, blinkJSON{Entity: bl.Entity, Visual: orEmpty(bl.Visual), Vanished: bl.Vanished, Appeared: bl.Appeared})
	}
	for _, t := range s.TradeLog {
		b.TradeLog = append(b.TradeLog, tradeJSON{Bot: t.Bot, Partner: t.Partner,
			At: posJSON{t.At.X, t.At.Y, t.At.Z}, PartnerAt: posJSON{t.PartnerAt.X, t.PartnerAt.Y, t.PartnerAt.Z}})
	}
	for i, g := range game.Goods {
		b.Goods[g.String()] = s.Goods[i]
	}
	return b
}

// economyJSON is game.EconomyStats, field for field.
type economyJSON struct {
	Submitted   int   `json:"submitted"`
	Accepted    int   `json:"accepted"`
	Rejected    int   `json:"rejected"`
	Unknown     int   `json:"unknown"`
	Failed      int   `json:"failed"`
	Dropped     int   `json:"dropped"`
	Retries     int64 `json:"retries"`
	Kills       int   `json:"kills"`
	Loot        int   `json:"loot"`
	Bought      int   `json:"bought"`
	Refused     int   `json:"refused"`
	Committed   int   `json:"committed"`
	Cancelled   int   `json:"cancelled"`
	Forwarded   int   `json:"forwarded"`
	Resubmitted int   `json:"resubmitted"`
}

// The conversion above is a Go conversion: it stops compiling when
// game.EconomyStats gains, loses or renames a field, so this view cannot
// fall behind it silently.
var _ = economyJSON(game.EconomyStats{})

// unsettledJSON is one unsettled session in the report's audit.
type unsettledJSON struct {
	ID             string    `json:"id"`
	Scope          string    `json:"scope"`
	Node           string    `json:"node"`
	Records        int64     `json:"records"`
	LastRecordedAt time.Time `json:"last_recorded_at"`
}

// newAuditJSON is the audit under the keys of "shardwise econ audit
// --json" (econ.AuditJSON), its unsettled sessions in snake_case.
func newAuditJSON(a econ.AuditReport) econ.AuditJSON[unsettledJSON] {
	return econ.NewAuditJSON(a, a.Problems(true), func(u netting.UnsettledSession) unsettledJSON {
		return unsettledJSON{ID: u.ID, Scope: u.Scope, Node: u.NodeID, Records: u.Records, LastRecordedAt: u.LastRecordedAt}
	})
}

// ledgerJSON is netting.LedgerProof, the keys of "shardwise econ verify
// --json".
type ledgerJSON struct {
	Postings       int64  `json:"postings"`
	Accounts       int    `json:"accounts"`
	HeadHash       string `json:"head_hash"`
	StoredPostings int64  `json:"stored_postings"`
}

func newLedgerJSON(p netting.LedgerProof) ledgerJSON {
	return ledgerJSON{Postings: p.Head.Len, Accounts: p.Accounts, HeadHash: p.Head.Hash, StoredPostings: p.Head.Postings}
}
