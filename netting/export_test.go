package netting

import "sort"

// TamperLedger runs fn on the store's ledger as stored, for tests that
// rewrite it behind the store's back as an attacker or a broken disk
// would (storetest's tamper cases): fn may change, drop or reorder the
// chain it is given and returns the chain to keep, which is then sorted
// by Seq, and it may change the balances in place. The ids posted follow
// the chain kept; the head is left alone.
func (m *MemStore) TamperLedger(fn func(chain []ChainedPosting, balances map[string]int64) []ChainedPosting) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chain = fn(m.chain, m.balances)
	sort.SliceStable(m.chain, func(i, j int) bool { return m.chain[i].Seq < m.chain[j].Seq })
	m.posted = make(map[string]bool, len(m.chain))
	for _, c := range m.chain {
		m.posted[c.Posting.ID] = true
	}
}

// RegistryHeld reports whether l's registry lock is held (by anyone): a
// store call made under it finds it held.
func RegistryHeld(l *LocalReservations) bool {
	if l.mu.TryLock() {
		l.mu.Unlock()
		return false
	}
	return true
}

// PlantBugs puts back, on n's sessions opened from now on, the bugs issue
// 27 removed, for the model's bite test: oldRule lets a debit spend every
// session's pending credits (so a settle's replay refuses accepted
// movements), fundsFirst answers a refused resent key REJECTED without
// looking it up, forgetRefusals does not write a group commit's refused
// keys (rejections forgotten across sessions: a resend in a later epoch is
// judged again).
func PlantBugs(n *ClusterNode, oldRule, fundsFirst, forgetRefusals bool) {
	n.plant = plantedBugs{oldRule: oldRule, fundsFirst: fundsFirst, forgetRefusals: forgetRefusals}
}

// SetNonce fixes n's session nonce (normally random), so that a
// deterministic schedule (model_test.go) opens the same session ids, and
// settles ties ordered by id the same way, on every replay.
func SetNonce(n *ClusterNode, nonce string) { n.nonce = nonce }
