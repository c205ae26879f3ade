module github.com/edgelimit/edgelimit

go 1.26.8

require github.com/extism/go-pdk v1.1.3

require (
	github.com/tetratelabs/wazero v1.12.0 // indirect
	github.com/vmihailenco/msgpack/v5 v5.4.1 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/sys v0.44.0 // indirect
	golang.org/x/time v0.14.0 // indirect
)
