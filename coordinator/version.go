package coordinator

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/edgelimit/edgelimit/wasm/wire"
)

// ProtocolVersion is the wire protocol version the coordinator speaks
// (wire.Version): the "v" of every batch it takes and reply it sends.
// The edge module, the Go edge host and the JavaScript package (whose
// major version is this number) must speak the same one.
const ProtocolVersion = wire.Version

// VersionProblem is the body of the 400 answer to a sync batch of another
// protocol version (problem+json, type urn:edgelimit:problem:version):
// Code is "version_mismatch", Got the batch's version, Want the
// coordinator's.
type VersionProblem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
	Code   string `json:"code"`
	Got    int64  `json:"got"`
	Want   int64  `json:"want"`
}

// batchVersion returns the "v" field of an encoded batch, looked up among
// the top-level keys before the batch is decoded (a batch of another
// version may not decode as this one), and whether it has one.
func batchVersion(body []byte) (int64, bool) {
	var r wire.Reader
	r.Reset(body)
	for n := r.ReadMapHeader(); n > 0 && r.Err() == nil; n-- {
		if string(r.ReadStringBytes()) == "v" {
			v := r.ReadInt()
			return v, r.Err() == nil
		}
		r.Skip()
	}
	return 0, false
}

// refuseVersion answers 400 with a VersionProblem and returns true when
// body is a batch of a protocol version other than ProtocolVersion.
func (c *Coordinator) refuseVersion(w http.ResponseWriter, body []byte) bool {
	v, ok := batchVersion(body)
	if !ok || v == ProtocolVersion {
		return false
	}
	c.met.errors.WithLabelValues("version").Inc()
	p := VersionProblem{Type: "urn:edgelimit:problem:version", Title: "Incompatible protocol version",
		Status: http.StatusBadRequest, Field: "v", Code: "version_mismatch", Got: v, Want: ProtocolVersion,
		Detail: "the batch speaks edgelimit protocol version " + strconv.FormatInt(v, 10) +
			"; this coordinator speaks version " + strconv.Itoa(ProtocolVersion) +
			" (the edge module, the edge host or the JavaScript package (major version) and the coordinator must speak the same version)"}
	b, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(append(b, '\n'))
	return true
}
