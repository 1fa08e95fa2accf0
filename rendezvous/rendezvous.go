package rendezvous

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/shardwise/shardwise/errcode"
)

const (
	fnvOffset uint64 = 0xcbf29ce484222325
	fnvPrime  uint64 = 0x100000001b3
)

// Table is an immutable rendezvous placement over a fixed list of nodes.
// The zero value has no nodes: Owner returns "" and TopN nothing.
type Table struct {
	nodes []string
	// prefix[i] is the FNV-1a state after nodes[i] + "\n", so a lookup only
	// hashes the key once per node.
	prefix []uint64
	// weights is nil when placement is unweighted (New, or NewWeighted
	// with all weights equal); otherwise parallel to nodes.
	weights []float64
	// common is the weight every node has when weights is nil, for a
	// table built by NewWeighted (0, meaning 1, for one built by New).
	common float64
}

// Weighted is a node and its weight for NewWeighted.
type Weighted struct {
	Node   string
	Weight float64 // share of keys relative to the others; finite, > 0
}

// New returns a table over nodes, compatible with economy-lab's
// scopeRouter. An empty list or a duplicated node is a CONFIG.INVALID error.
// The table keeps its own copy of nodes.
func New(nodes []string) (*Table, error) {
	if err := validateNodes(nodes); err != nil {
		return nil, err
	}
	t := &Table{nodes: slices.Clone(nodes), prefix: make([]uint64, len(nodes))}
	for i, n := range nodes {
		t.prefix[i] = fnvUnits(fnvString(fnvOffset, n), '\n')
	}
	return t, nil
}

// NewWeighted returns a table that gives each node a share of keys
// proportional to its weight (logarithmic method). Nodes follow the same
// rules as New; a weight that is not finite and positive is a CONFIG.INVALID
// error. When all weights are equal the table places exactly like New.
func NewWeighted(nodes []Weighted) (*Table, error) {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Node
		if !(n.Weight > 0) || math.IsInf(n.Weight, 1) {
			return nil, errcode.Config(fmt.Sprintf("nodes[%d].Weight", i), n.Weight, "must be finite and greater than 0")
		}
	}
	t, err := New(names)
	if err != nil {
		return nil, err
	}
	t.common = nodes[0].Weight
	for _, n := range nodes[1:] {
		if n.Weight != nodes[0].Weight {
			t.weights = make([]float64, len(nodes))
			for i, n := range nodes {
				t.weights[i] = n.Weight
			}
			break
		}
	}
	return t, nil
}

func validateNodes(nodes []string) error {
	if len(nodes) == 0 {
		return errcode.Config("nodes", nodes, "must not be empty")
	}
	seen := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if j, dup := seen[n]; dup {
			return errcode.Config(fmt.Sprintf("nodes[%d]", i), n, fmt.Sprintf("duplicates nodes[%d]", j))
		}
		seen[n] = i
	}
	return nil
}

// With returns a table with node added last, at weight (1 for a table
// built by New), leaving t unchanged. It places exactly like NewWeighted
// of t's nodes followed by node, but hashes only the new node's name: the
// rest is a copy of t's per-node state (16 bytes a node, the cost of one
// lookup). A duplicate node or a weight that is not finite and positive is
// a CONFIG.INVALID error.
func (t *Table) With(node string, weight float64) (*Table, error) {
	if !(weight > 0) || math.IsInf(weight, 1) {
		return nil, errcode.Config("weight", weight, "must be finite and greater than 0")
	}
	if slices.Contains(t.nodes, node) {
		return nil, errcode.Config("node", node, "is already in the table")
	}
	n := len(t.nodes)
	nt := &Table{
		nodes:  append(slices.Clip(t.nodes), node),
		prefix: append(slices.Clip(t.prefix), fnvUnits(fnvString(fnvOffset, node), '\n')),
		common: t.common,
	}
	switch {
	case n == 0:
		nt.common = weight
	case t.weights != nil:
		nt.weights = append(slices.Clip(t.weights), weight)
	case weight != t.uniform():
		nt.weights = make([]float64, n+1)
		for i := range n {
			nt.weights[i] = t.uniform()
		}
		nt.weights[n] = weight
	}
	return nt, nil
}

// Without returns a table without node, leaving t unchanged; the other
// nodes keep their order. It places exactly like NewWeighted of the
// remaining nodes. Removing an absent node returns t; removing the last
// node returns the zero Table (no owner for any key).
func (t *Table) Without(node string) *Table {
	i := slices.Index(t.nodes, node)
	if i < 0 {
		return t
	}
	nt := &Table{
		nodes:  slices.Delete(slices.Clone(t.nodes), i, i+1),
		prefix: slices.Delete(slices.Clone(t.prefix), i, i+1),
		common: t.common,
	}
	if t.weights != nil {
		w := slices.Delete(slices.Clone(t.weights), i, i+1)
		// All remaining weights equal: the unweighted placement, as
		// NewWeighted would choose.
		if len(w) > 0 && !slices.ContainsFunc(w, func(x float64) bool { return x != w[0] }) {
			nt.common = w[0]
		} else {
			nt.weights = w
		}
	}
	if len(nt.nodes) == 0 {
		return &Table{}
	}
	return nt
}

// uniform is the weight every node of an unweighted table has.
func (t *Table) uniform() float64 {
	if t.common == 0 {
		return 1
	}
	return t.common
}

// Nodes returns the node list in the order given. The slice is a copy.
func (t *Table) Nodes() []string { return slices.Clone(t.nodes) }

// Len returns the number of nodes.
func (t *Table) Len() int { return len(t.nodes) }

// Weight returns node's weight as it was given: 1 for every node of a
// table built by New. (A table whose weights are all equal places like New
// whatever the common weight is.)
func (t *Table) Weight(node string) (float64, bool) {
	i := slices.Index(t.nodes, node)
	switch {
	case i < 0:
		return 0, false
	case t.weights == nil:
		return t.uniform(), true
	}
	return t.weights[i], true
}

// Score is the compatible weight of node for key: fmix64 of FNV-1a 64 over
// the UTF-16 units of node + "\n" + key. It is exported so other
// implementations can be checked against it.
func Score(node, key string) uint64 {
	return fmix64(fnvString(fnvUnits(fnvString(fnvOffset, node), '\n'), key))
}

// Owner returns the node that owns key: the highest score, the earlier node
// on a tie. It returns "" only for the zero Table.
func (t *Table) Owner(key string) string {
	if len(t.nodes) == 0 {
		return ""
	}
	var buf [stackUnits]uint16
	units := encodeKey(buf[:0], key)
	if t.weights != nil {
		return t.nodes[ownerWeighted(t.prefix, t.weights, units)]
	}
	return t.nodes[owner(t.prefix, units)]
}

// stackUnits is the longest key (in UTF-16 units) that lookups encode on the
// stack; longer keys cost one allocation.
const stackUnits = 256

// scores4 continues the FNV states of four nodes over the key and mixes
// them. Each score is a chain of dependent multiplies; four independent
// chains keep the multiplier busy instead of waiting on one.
func scores4(p []uint64, key []uint16) (uint64, uint64, uint64, uint64) {
	h0, h1, h2, h3 := p[0], p[1], p[2], p[3]
	for j := 0; j < len(key); j++ {
		c := uint64(key[j])
		h0 = (h0 ^ c) * fnvPrime
		h1 = (h1 ^ c) * fnvPrime
		h2 = (h2 ^ c) * fnvPrime
		h3 = (h3 ^ c) * fnvPrime
	}
	return fmix64(h0), fmix64(h1), fmix64(h2), fmix64(h3)
}

func score1(h uint64, key []uint16) uint64 {
	for j := 0; j < len(key); j++ {
		h = (h ^ uint64(key[j])) * fnvPrime
	}
	return fmix64(h)
}

// owner returns the index of the highest score. Comparisons are strictly
// greater in list order, so a tie stays with the earlier node; node 0 is
// taken unconditionally to start.
func owner(p []uint64, key []uint16) int {
	best, bestScore := 0, uint64(0)
	i := 0
	for ; i+4 <= len(p); i += 4 {
		s0, s1, s2, s3 := scores4(p[i:i+4], key)
		if s0 > bestScore || i == 0 {
			best, bestScore = i, s0
		}
		if s1 > bestScore {
			best, bestScore = i+1, s1
		}
		if s2 > bestScore {
			best, bestScore = i+2, s2
		}
		if s3 > bestScore {
			best, bestScore = i+3, s3
		}
	}
	for ; i < len(p); i++ {
		if s := score1(p[i], key); s > bestScore || i == 0 {
			best, bestScore = i, s
		}
	}
	return best
}

// weightedBest keeps the running maximum of the logarithmic scores.
type weightedBest struct {
	i     int
	score float64
}

// consider offers node i with weight w and raw score raw. −ln(u) ≥ 1−u, so
// w/(1−u) bounds the score from above; most nodes fail that cheap bound and
// never pay for the logarithm. The margin covers rounding; an exact tie
// stays with the earlier node, so a bound equal to the best prunes too.
func (b *weightedBest) consider(i int, w float64, raw uint64) {
	if w/(1-unitInterval(raw))*(1+1e-9) <= b.score {
		return
	}
	if s := logScore(w, raw); s > b.score {
		b.i, b.score = i, s
	}
}

func ownerWeighted(p []uint64, weights []float64, key []uint16) int {
	best := weightedBest{score: math.Inf(-1)}
	i := 0
	for ; i+4 <= len(p); i += 4 {
		s0, s1, s2, s3 := scores4(p[i:i+4], key)
		best.consider(i, weights[i], s0)
		best.consider(i+1, weights[i+1], s1)
		best.consider(i+2, weights[i+2], s2)
		best.consider(i+3, weights[i+3], s3)
	}
	for ; i < len(p); i++ {
		best.consider(i, weights[i], score1(p[i], key))
	}
	return best.i
}

// logScore is the logarithmic method's −w / ln(u), with u taken from the top
// 53 bits of the score and kept strictly inside (0, 1) by the half-step
// offset. It grows with the raw score, so equal weights rank nodes as the
// unweighted table does (up to ties in the low 11 bits).
func logScore(w float64, raw uint64) float64 {
	return -w / math.Log(unitInterval(raw))
}

func unitInterval(raw uint64) float64 {
	return (float64(raw>>11) + 0.5) / (1 << 53)
}

// TopN returns up to n nodes for key, best first: the owner, then the
// runners-up, as replicas. It never returns more than Len nodes; n < 1 gives
// an empty slice. When a node is removed, each key's list only loses that
// node, and the next one moves up.
func (t *Table) TopN(key string, n int) []string {
	n = min(n, len(t.nodes))
	if n < 1 {
		return []string{}
	}
	if n == 1 {
		return []string{t.Owner(key)}
	}
	var buf [stackUnits]uint16
	units := encodeKey(buf[:0], key)
	type ranked struct {
		i     int
		raw   uint64
		score float64
	}
	all := make([]ranked, len(t.nodes))
	for i := range t.nodes {
		all[i] = ranked{i: i, raw: score1(t.prefix[i], units)}
		if t.weights != nil {
			all[i].score = logScore(t.weights[i], all[i].raw)
		}
	}
	slices.SortFunc(all, func(a, b ranked) int {
		var c int
		if t.weights != nil {
			c = cmp.Compare(b.score, a.score)
		} else {
			c = cmp.Compare(b.raw, a.raw)
		}
		if c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	out := make([]string, n)
	for k := range out {
		out[k] = t.nodes[all[k].i]
	}
	return out
}

// encodeKey appends key's UTF-16 units to dst.
func encodeKey(dst []uint16, key string) []uint16 {
	for j := 0; j < len(key); j++ {
		if c := key[j]; c < utf8.RuneSelf {
			dst = append(dst, uint16(c))
			continue
		}
		for _, r := range key[j:] {
			dst = utf16.AppendRune(dst, r)
		}
		break
	}
	return dst
}

// fnvString continues an FNV-1a 64 state over the UTF-16 units of s.
func fnvString(h uint64, s string) uint64 {
	for _, r := range s {
		if r < 0x10000 {
			h = fnvUnits(h, uint16(r))
			continue
		}
		hi, lo := utf16.EncodeRune(r)
		h = fnvUnits(h, uint16(hi), uint16(lo))
	}
	return h
}

func fnvUnits(h uint64, units ...uint16) uint64 {
	for _, u := range units {
		h ^= uint64(u)
		h *= fnvPrime
	}
	return h
}

// fmix64 is murmur3's 64-bit finaliser.
func fmix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
