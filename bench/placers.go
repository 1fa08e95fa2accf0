package bench

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
	jump "github.com/dgryski/go-jump"
	dgrendezvous "github.com/dgryski/go-rendezvous"
	"github.com/golang/groupcache/consistenthash"
	"github.com/serialx/hashring"
	"stathat.com/c/consistent"

	swring "github.com/shardwise/shardwise/hashring"
	swrendezvous "github.com/shardwise/shardwise/rendezvous"
)

// VNodes is the number of ring points per node given to every ring library
// that lets us choose it, so the rings are compared at equal size.
const VNodes = 100

// NodeCounts are the cluster sizes every measurement is taken at.
var NodeCounts = []int{10, 100, 1000}

// NodeNames returns n node ids of the host:port form the seeds use.
func NodeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.%d.%d.%d:6379", i>>16&255, i>>8&255, i&255)
	}
	return out
}

// Placer is one placement implementation reduced to key → node, for the
// measurements that do not time anything (movement, spread).
type Placer struct {
	Name   string
	Lookup func(key string) string
}

// Impl describes one implementation: how to build a placer over a node list.
type Impl struct {
	Name  string
	Kind  string // "ring", "rendezvous" or "stateless"
	Ours  bool
	Build func(nodes []string) Placer
}

// Impls lists every implementation compared, ours first.
var Impls = []Impl{
	{"shardwise hashring (SHA-1, compatible)", "ring", true, func(n []string) Placer { return ringPlacer(NewOurRing(nil, n)) }},
	{"shardwise hashring (XXHash)", "ring", true, func(n []string) Placer { return ringPlacer(NewOurRing(swring.XXHash, n)) }},
	{"stathat.com/c/consistent", "ring", false, func(n []string) Placer {
		c := NewStathat(n)
		return Placer{Lookup: func(k string) string { s, _ := c.Get(k); return s }}
	}},
	{"serialx/hashring", "ring", false, func(n []string) Placer {
		r := NewSerialx(n)
		return Placer{Lookup: func(k string) string { s, _ := r.GetNode(k); return s }}
	}},
	{"groupcache/consistenthash", "ring", false, func(n []string) Placer {
		return Placer{Lookup: NewGroupcache(n).Get}
	}},
	{"shardwise rendezvous (compatible)", "rendezvous", true, func(n []string) Placer {
		return Placer{Lookup: NewOurRendezvous(n).Owner}
	}},
	{"dgryski/go-rendezvous (xxhash)", "rendezvous", false, func(n []string) Placer {
		return Placer{Lookup: NewDgryski(n).Lookup}
	}},
	{"dgryski/go-jump (xxhash)", "stateless", false, func(n []string) Placer {
		return Placer{Lookup: func(k string) string { return n[JumpIndex(k, len(n))] }}
	}},
}

func ringPlacer(r *swring.Ring) Placer {
	return Placer{Lookup: func(k string) string { s, _ := r.Get(k); return s }}
}

// NewOurRing builds a shardwise ring with VNodes points per node. A nil hash
// is the compatible default (SHA1), as a user would write it.
func NewOurRing(hash swring.HashFunc, nodes []string) *swring.Ring {
	r := swring.New(hash)
	for _, n := range nodes {
		if err := r.Add(n, VNodes); err != nil {
			panic(err)
		}
	}
	return r
}

// NewOurRendezvous builds a compatible shardwise rendezvous table.
func NewOurRendezvous(nodes []string) *swrendezvous.Table {
	t, err := swrendezvous.New(nodes)
	if err != nil {
		panic(err)
	}
	return t
}

// NewStathat builds a stathat ring with VNodes points per node.
func NewStathat(nodes []string) *consistent.Consistent {
	c := consistent.New()
	c.NumberOfReplicas = VNodes
	c.Set(nodes)
	return c
}

// NewSerialx builds a serialx ring; weight w gives w points per node.
func NewSerialx(nodes []string) *hashring.HashRing {
	w := make(map[string]int, len(nodes))
	for _, n := range nodes {
		w[n] = VNodes
	}
	return hashring.NewWithWeights(w)
}

// NewGroupcache builds a groupcache ring with VNodes points per node.
func NewGroupcache(nodes []string) *consistenthash.Map {
	m := consistenthash.New(VNodes, nil)
	m.Add(nodes...)
	return m
}

// NewDgryski builds a dgryski rendezvous table hashing with xxhash.
func NewDgryski(nodes []string) *dgrendezvous.Rendezvous {
	return dgrendezvous.New(nodes, xxhash.Sum64String)
}

// JumpIndex is jump consistent hashing of key's xxhash into n buckets.
func JumpIndex(key string, n int) int {
	return int(jump.Hash(xxhash.Sum64String(key), n))
}
