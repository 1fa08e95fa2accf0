package zone

// ReplicationFirst makes r apply, at each drain, the replication batches
// queued before the control messages (a transfer among them), as the
// link may deliver them: they travel on different streams.
func (r *Runtime) ReplicationFirst() { r.cluster.replicationFirst = true }
