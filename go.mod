module github.com/turnledger/turnledger

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/julienschmidt/httprouter v1.3.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
