// Package deployconfig holds the JSON Schema (draft-07) of version 4
// configuration files of the function-deployment tool (serverless.yml,
// serverless.yaml, serverless.json) and a validator that reports each
// problem with its JSON pointer and its line and column.
//
// The schema is embedded (schema.json, printed by `turnledger deployconfig
// schema`) and checked by github.com/santhosh-tekuri/jsonschema/v6; YAML is
// read into nodes by go.yaml.in/yaml/v3 so every value keeps its position.
//
// Decisions where the spec says "not shown" (docs/deployconfig.md says the
// same for users):
//
//   - The root is closed: the properties of the spec plus the tool's own
//     root settings (build, configValidationMode, deprecationNotificationMode,
//     disabledDeprecations, useDotenv, variablesResolutionMode,
//     unresolvedVariablesNotificationMode, console, dashboard, outputs,
//     license) and the Lift plugin's constructs. Any other root key, such as
//     a typo "functons" or a v4 extension block "cdk-instance", is reported.
//   - service is a non-empty string; the legacy object form {name} is
//     accepted too, because files that declare frameworkVersion 3 still use it.
//   - provider is an object with a name. For name "aws" its properties are
//     checked against a closed list (a typo is reported), functions take the
//     AWS shape (handler or image, events that each name exactly one known
//     event source). Other providers (azure, google, knative, kubeless,
//     openwhisk, cloudflare, scaleway, and any other name) keep their own
//     properties: only name and the common runtime, region, stage,
//     memorySize, timeout and environment are typed. A plain string
//     provider ("provider: aws") is rejected: the tool reads the provider's
//     settings from an object.
//   - Variables: the validator runs before the tool resolves ${...}. A string
//     that is one whole variable (it starts with "${" and ends with "}")
//     stands for any section or value: provider, plugins, package, custom,
//     resources, a function, a number, a boolean. Strings that merely contain
//     variables are strings.
//   - CloudFormation short tags are read as their long form, as CloudFormation
//     reads them: !Ref X is {"Ref": "X"}, !Condition X is {"Condition": "X"},
//     and every other !Name v is {"Fn::Name": v} (!Sub, !Join, !GetAtt,
//     !ImportValue, !Select, !Split, !If, !Equals, !And, !Or, !Not,
//     !FindInMap, !Base64, !Cidr, !GetAZs, !Length, !ToJsonString,
//     !Transform, ...). !GetAtt A.B in scalar form becomes ["A", "B"]
//     (split at the first dot). An unknown tag such as !Reff is a problem
//     at its position; the value is then checked without the tag.
//   - YAML anchors, aliases and merge keys (<<) are expanded; a duplicate key
//     is a problem; a document that expands past a million values is refused
//     as unreadable.
//   - Exit statuses of `turnledger deployconfig validate`: 0 when every file
//     is valid, 1 when some file is invalid, 2 when some file cannot be read
//     or is not YAML or JSON (a syntax error, or more than one YAML document).
//     2 wins over 1.
//   - A file whose name ends in .json is read as JSON (syntax errors are
//     JSON's, with line and column); any other as YAML.
package deployconfig
