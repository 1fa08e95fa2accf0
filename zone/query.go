package zone

import "github.com/shardwise/shardwise/ecs"

// The query constructors of a module's systems. Each returns an ecs query
// over the entities this node simulates: the runtime adds the exclusion of
// the Ghost marker (a foreign entity made real for perception, written only
// by the runtime from what its owner sends) and of the Frozen marker (an
// entity in a handoff) itself, so a system cannot write an entity another
// node simulates by forgetting a term (runtime invariant 1). With and
// Without on the result only narrow it further. Build them in
// Module.Setup, after the components are registered; like any ecs query
// they allocate nothing per tick.
//
// A query made with ecs.NewQueryN directly also walks ghosts and frozen
// entities: use one only to read (perception), never to write.

// Query1 returns a query over the simulated entities with A.
func Query1[A any](r *Runtime, a *ecs.Store[A]) *ecs.Query1[A] {
	return ecs.NewQuery1(a).Without(r.notSimulated()...)
}

// Query2 returns a query over the simulated entities with A and B.
func Query2[A, B any](r *Runtime, a *ecs.Store[A], b *ecs.Store[B]) *ecs.Query2[A, B] {
	return ecs.NewQuery2(a, b).Without(r.notSimulated()...)
}

// Query3 returns a query over the simulated entities with A, B and C.
func Query3[A, B, C any](r *Runtime, a *ecs.Store[A], b *ecs.Store[B], c *ecs.Store[C]) *ecs.Query3[A, B, C] {
	return ecs.NewQuery3(a, b, c).Without(r.notSimulated()...)
}

// Query4 returns a query over the simulated entities with A, B, C and D.
func Query4[A, B, C, D any](r *Runtime, a *ecs.Store[A], b *ecs.Store[B], c *ecs.Store[C], d *ecs.Store[D]) *ecs.Query4[A, B, C, D] {
	return ecs.NewQuery4(a, b, c, d).Without(r.notSimulated()...)
}

// notSimulated is the markers every module query excludes.
func (r *Runtime) notSimulated() []ecs.Component { return []ecs.Component{r.ghost, r.frozen} }
