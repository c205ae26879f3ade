package syncloop

// Amendments (wasm/wire/amend.go): a host holding a request for a lease
// while its isolate's batch is in flight sends the batch amended with the
// request's ask at once, next to the batch, and applies both replies; the
// module takes the amendment's reply while the next batch is in flight
// too, so the host cuts that batch as usual. The edge host and the
// simulator share these rules.

// MaxAmends is how many amendments of one batch an isolate has in flight
// at most: a request held while one is on its way waits for a reply.
// (Measured on the simulator's corpus, 2 and 4 gave no better wait p99
// for up to 1.5x the syncs: a request the first amendment could not serve
// the second rarely can, and it waits for both replies before its batch.)
const MaxAmends = 1
