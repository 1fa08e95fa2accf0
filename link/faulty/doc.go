// Package faulty injects network faults between named nodes for tests:
// drop, delay and duplicate outgoing gRPC stream messages, and cut and heal
// the connections between two nodes.
//
// It owns a Network: nodes listen through Network.Listen (which names the
// address) and dial through Network.Dialer(from), and their gRPC clients
// carry Network.StreamInterceptor(from). Faults are set per directed pair
// (from → to) and optionally per stream (the last element of the gRPC
// method name, case-insensitive, for example "control").
//
// It does not know the link protocol: a duplicate is the same message sent
// twice, a drop is a message never sent, so the receiver's own sequence
// checks are what the tests exercise. Randomness comes from a seed, so a
// failing run can be replayed. Cut closes every connection from one node
// to the other and refuses new ones until Heal; it does not lose bytes in
// the middle of a TLS record (that would only test TLS).
package faulty
