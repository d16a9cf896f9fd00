package streamapi

import (
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/kube-openapi/pkg/common"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// openAPIConfig is what k8s.io/apiserver builds its field managers from,
// which it needs for every kind it serves even though nothing here is
// ever written. No OpenAPI document is served (SkipOpenAPIInstallation):
// the subresources stream, and kubectl explains no subresource.
func openAPIConfig() *common.OpenAPIV3Config {
	return genericapiserver.DefaultOpenAPIV3Config(openAPIDefinitions, openapinamer.NewDefinitionNamer(scheme))
}

// openAPIDefinitions has the one kind of the group, the ShellJob, as a
// free-form object: shell.shelljob.dev's CRD holds its schema.
func openAPIDefinitions(common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	return map[string]common.OpenAPIDefinition{
		openapiutil.GetCanonicalTypeName(&shellv1alpha1.ShellJob{}): {
			Schema: spec.Schema{
				SchemaProps:      spec.SchemaProps{Type: []string{"object"}, Description: "A ShellJob of shell.shelljob.dev, whose subresources these are."},
				VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}},
			},
		},
	}
}
