package syncloop

import "github.com/edgelimit/edgelimit/wasm/wire"

// DefaultMaxReplyBytes is the default HTTPTransport.MaxReplyBytes:
// wire.MaxReplyBytes (9,301,068 bytes), the largest reply a coordinator
// may send. A smaller cap refuses a legitimate reply (a batch of 8,192
// keys of 256 bytes on a paused limiter is answered with 5.6 MB:
// TestLargestReplyRead), and the isolate would send the same batch again
// at every sync, never acknowledged.
const DefaultMaxReplyBytes = wire.MaxReplyBytes
