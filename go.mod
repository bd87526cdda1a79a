module github.com/turnledger/turnledger

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/text v0.14.0
)
