package deployconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusDir finds ../shared/deployconfig-corpus/real beside the repository
// (where CI puts shared/). Its absence is a failure, not a skip.
func corpusDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory: cannot find the repository root")
		}
		dir = parent
	}
	real := filepath.Join(dir, "..", "shared", "deployconfig-corpus", "real")
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		t.Fatalf("the real configuration corpus is missing: %s must be a folder (shared/ is expected beside the repository, as CI lays it out): %v", real, err)
	}
	return real
}

// realVerdicts is the expected verdict on each real file: nil for valid,
// else the problems. Every file that declares frameworkVersion 3 or 4 (or
// ^4.4.0) is valid; the few rejected ones are explained beside them.
var realVerdicts = map[string][]Problem{
	"AnomalyInnovations__serverless-stack-demo-api__serverless.yml":                                              nil,
	"AnomalyInnovations__serverless-stack-demo-ext-api__services__billing-api__serverless.yml":                   nil,
	"AnomalyInnovations__serverless-stack-demo-ext-api__services__notes-api__serverless.yml":                     nil,
	"dherault__serverless-offline__examples__events__alb__serverless.yml":                                        nil,
	"dherault__serverless-offline__examples__events__websocket__serverless.yml":                                  nil,
	"dherault__serverless-offline__tests__integration__docker__layers__serverless.yml":                           nil,
	"dherault__serverless-offline__tests__integration__jwt-authorizer__serverless.yml":                           nil,
	"dherault__serverless-offline__tests__manual__nodejs__serverless.yml":                                        nil,
	"dherault__serverless-offline__tests__scenario__serverless-plugins__serverless-esbuild__app__serverless.yml": nil,
	"floydspace__serverless-esbuild__examples__individually__serverless.yml":                                     nil,
	"getlift__lift__test__fixtures__storage__serverless.yml":                                                     nil,
	"getlift__lift__test__fixtures__variables__serverless.yml":                                                   nil,
	"serverless-heaven__serverless-webpack__examples__serverless-v4__serverless.yml":                             nil,
	"serverless-heaven__serverless-webpack__examples__typescript__serverless.yml":                                nil,
	// provider, plugins, package and custom are whole ${file(...)} variables.
	"serverless-operations__serverless-step-functions__fixtures__athena__serverless.yml":            nil,
	"serverless-operations__serverless-step-functions__fixtures__notifications__serverless.yml":     nil,
	"serverless-operations__serverless-step-functions__fixtures__use-exact-version__serverless.yml": nil,
	// frameworkVersion ">=1.6.0 <2.1.0": provider.accountId was never an AWS
	// provider property (the tool of that time ignored unknown keys).
	"serverless__examples__aws-dotnet-rest-api-with-dynamodb__src__DotNetServerless.Lambda__serverless.yml": {
		p("/provider/accountId", 11, 3, `property "accountId" is not allowed here`),
	},
	"serverless__examples__aws-ffmpeg-layer__serverless.yml":                  nil,
	"serverless__examples__aws-golang-rest-api-with-dynamodb__serverless.yml": nil,
	// No provider (required by the schema) and a v4 extension block,
	// cdk-instance, that is not a property of the configuration file.
	"serverless__examples__aws-node-cdk-extension__serverless.yml": {
		p("", 1, 1, `missing property "provider"`),
		p("/cdk-instance", 3, 1, `property "cdk-instance" is not allowed here`),
	},
	// service: {name: ...}, the legacy object form: accepted.
	"serverless__examples__aws-node-dynamic-image-resizer__serverless.yml":                                                                               nil,
	"serverless__examples__aws-node-env-variables-encrypted-in-a-file__serverless.yml":                                                                   nil,
	"serverless__examples__aws-node-express-dynamodb-api__serverless.yml":                                                                                nil,
	"serverless__examples__aws-node-github-check__serverless.yaml":                                                                                       nil,
	"serverless__examples__aws-node-graphql-and-rds__serverless.yml":                                                                                     nil,
	"serverless__examples__aws-node-http-api-dynamodb-local__serverless.yml":                                                                             nil,
	"serverless__examples__aws-node-http-api__serverless.yml":                                                                                            nil,
	"serverless__examples__aws-node-rest-api-typescript-simple__serverless.yml":                                                                          nil,
	"serverless__examples__aws-node-scheduled-cron__serverless.yml":                                                                                      nil,
	"serverless__examples__aws-node-ses-receive-email-body__serverless.yml":                                                                              nil,
	"serverless__examples__aws-node-shared-gateway__gateway__serverless.yml":                                                                             nil,
	"serverless__examples__aws-node-shared-gateway__products__serverless.yml":                                                                            nil,
	"serverless__examples__aws-node-signed-uploads__serverless.yml":                                                                                      nil,
	"serverless__examples__aws-node-single-page-app-via-cloudfront__serverless.yml":                                                                      nil,
	"serverless__examples__aws-node-typescript-kinesis__serverless.yml":                                                                                  nil,
	"serverless__examples__aws-node-websockets-authorizers__serverless.yml":                                                                              nil,
	"serverless__examples__aws-node__serverless.yml":                                                                                                     nil,
	"serverless__examples__aws-python-flask-api__serverless.yml":                                                                                         nil,
	"serverless__examples__aws-python-flask-dynamodb-api__serverless.yml":                                                                                nil,
	"serverless__examples__aws-python-pynamodb-s3-sigurl__serverless.yml":                                                                                nil,
	"serverless__examples__aws-python-sqs-worker__serverless.yml":                                                                                        nil,
	"serverless__examples__aws-ruby-step-functions-with-callback__serverless.yml":                                                                        nil,
	"serverless__examples__aws-ruby-step-functions__serverless.yml":                                                                                      nil,
	"serverless__examples__aws-rust-simple-http-endpoint__serverless.yml":                                                                                nil,
	"serverless__examples__azure-node-simple-http-endpoint__serverless.yml":                                                                              nil,
	"serverless__examples__azure-node-typescript-servicebus-trigger-endpoint__serverless.yml":                                                            nil,
	"serverless__examples__google-node-typescript-http-endpoint__serverless.yml":                                                                         nil,
	"serverless__examples__google-python-simple-http-endpoint__serverless.yml":                                                                           nil,
	"serverless__examples__kubeless-python-simple-function__serverless.yml":                                                                              nil,
	"serverless__examples__legacy__aws-nodejs__serverless.yml":                                                                                           nil,
	"serverless__examples__legacy__cloudflare-workers__serverless.yml":                                                                                   nil,
	"serverless__examples__legacy__knative-docker__serverless.yml":                                                                                       nil,
	"serverless__examples__openwhisk-node-simple__serverless.yml":                                                                                        nil,
	"serverless__serverless-azure-functions__examples__typescript-webpack__serverless.yml":                                                               nil,
	"serverless__serverless-azure-functions__integrationTests__configurations__python38__serverless.yml":                                                 nil,
	"serverless__serverless-python-requirements__tests__base__serverless.yml":                                                                            nil,
	"serverless__serverless-python-requirements__tests__scaleway_provider__serverless.yml":                                                               nil,
	"serverless__serverless__packages__serverless__lib__plugins__aws__bedrock-agentcore__examples__javascript__langgraph-browser-custom__serverless.yml": nil,
	"serverless__serverless__packages__serverless__lib__plugins__aws__bedrock-agentcore__examples__javascript__langgraph-comprehensive__serverless.yml":  nil,
	"serverless__serverless__packages__serverless__lib__plugins__aws__bedrock-agentcore__examples__python__langgraph-multi-gateway__serverless.yml":      nil,
	// frameworkVersion "*" CLI fixtures with a plain-string provider: the
	// provider must be an object with a name (or a whole ${...} variable).
	"serverless__serverless__test__fixtures__cli__config-type-json__serverless.json": {
		p("/provider", 3, 15, "got string, want object or a ${...} variable"),
	},
	"serverless__serverless__test__fixtures__cli__config-type-yaml__serverless.yaml": {
		p("/provider", 2, 11, "got string, want object or a ${...} variable"),
	},
	// provider someProvider: a non-AWS provider, only name is checked.
	"serverless__serverless__test__fixtures__programmatic__config-schema-extensions__serverless.yml":                         nil,
	"serverless__serverless__test__fixtures__programmatic__function-layers__serverless.yml":                                  nil,
	"serverless__serverless__test__fixtures__programmatic__plugin__serverless.yml":                                           nil,
	"serverless__serverless__test__fixtures__programmatic__variables-legacy__serverless.yml":                                 nil,
	"serverless__serverless__test__unit__lib__cli__triage__fixtures__serverless__json__component-in-custom__serverless.json": nil,
}

func TestRealCorpus(t *testing.T) {
	dir := corpusDir(t)
	v := newValidator(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "SOURCES.md" {
			continue
		}
		seen[name] = true
		want, ok := realVerdicts[name]
		if !ok {
			t.Errorf("%s has no expected verdict in realVerdicts", name)
			continue
		}
		got, err := validateFile(t, v, filepath.Join(dir, name))
		if err != nil {
			t.Errorf("Validate(%s) error = %v, want it read", name, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Validate(%s) (-want +got):\n%s", name, diff)
		}
	}
	if len(seen) != 68 {
		t.Errorf("corpus has %d files, want 68", len(seen))
	}
	for name := range realVerdicts {
		if !seen[name] {
			t.Errorf("realVerdicts names %s, which is not in the corpus", name)
		}
	}
}
