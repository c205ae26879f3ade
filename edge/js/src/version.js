// The package's version and the protocol version it speaks. One number:
// the package's major version is the wire protocol version (wire.Version
// of the Go packages), which the module it ships and the coordinator it
// syncs with must speak too. test/version.test.js checks package.json, the
// Go constant and the shipped module against these.

/** The package's version (package.json "version"). */
export const VERSION = '1.0.0';

/** The wire protocol version: the "v" of configurations, batches and replies. */
export const PROTOCOL_VERSION = 1;
