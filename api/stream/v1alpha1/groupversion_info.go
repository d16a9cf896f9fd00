/*
Copyright 2026 The shelljob Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package v1alpha1 holds the options of the stream.shelljob.dev API: the
// log, files and attach subresources of a ShellJob, which the operator
// serves through the API server's aggregation layer (internal/streamapi).
// The group has no objects of its own: a ShellJob lives in
// shell.shelljob.dev, and these are the query parameters of its
// subresources here, as PodLogOptions are of pods/log.
//
// It is no CustomResourceDefinition's group: no CRD is generated from it.
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=stream.shelljob.dev
package v1alpha1

import (
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the subresources.
const GroupName = "stream.shelljob.dev"

var (
	// GroupVersion is the group and version of this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder adds the options of this package to a scheme, and how
	// a request's query becomes each of them.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addQueryConversions)

	// AddToScheme adds the types of this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ShellJobLogOptions{}, &ShellJobFilesOptions{}, &ShellJobAttachOptions{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

// addQueryConversions registers how a query decodes into each options
// type (runtime.ParameterCodec), as conversion-gen writes it for
// PodLogOptions: a bad number is an error, a flag is true unless it is
// absent, "false" or "0".
func addQueryConversions(scheme *runtime.Scheme) error {
	if err := scheme.AddConversionFunc((*url.Values)(nil), (*ShellJobLogOptions)(nil), func(a, b any, s conversion.Scope) error {
		return convertQueryToLogOptions(a.(*url.Values), b.(*ShellJobLogOptions), s)
	}); err != nil {
		return err
	}
	if err := scheme.AddConversionFunc((*url.Values)(nil), (*ShellJobFilesOptions)(nil), func(a, b any, s conversion.Scope) error {
		return convertQueryToFilesOptions(a.(*url.Values), b.(*ShellJobFilesOptions), s)
	}); err != nil {
		return err
	}
	return scheme.AddConversionFunc((*url.Values)(nil), (*ShellJobAttachOptions)(nil), func(a, b any, s conversion.Scope) error {
		return convertQueryToAttachOptions(a.(*url.Values), b.(*ShellJobAttachOptions), s)
	})
}

func convertQueryToLogOptions(in *url.Values, out *ShellJobLogOptions, s conversion.Scope) error {
	if v, ok := (*in)["offset"]; ok {
		if err := runtime.Convert_Slice_string_To_int64(&v, &out.Offset, s); err != nil {
			return err
		}
	}
	if err := flags(in, s, map[string]*bool{"follow": &out.Follow, "framed": &out.Framed, "awaitStart": &out.AwaitStart, "exit": &out.Exit, "deliver": &out.Deliver}); err != nil {
		return err
	}
	if v, ok := (*in)["text"]; ok && len(v) > 0 {
		out.Text = TextMode(v[0])
	}
	return nil
}

func convertQueryToFilesOptions(in *url.Values, out *ShellJobFilesOptions, s conversion.Scope) error {
	if v, ok := (*in)["offset"]; ok {
		return runtime.Convert_Slice_string_To_int64(&v, &out.Offset, s)
	}
	return nil
}

func convertQueryToAttachOptions(in *url.Values, out *ShellJobAttachOptions, s conversion.Scope) error {
	return flags(in, s, map[string]*bool{"stdin": &out.Stdin, "stdout": &out.Stdout, "stderr": &out.Stderr, "tty": &out.TTY})
}

// flags decodes the query's boolean parameters into their fields.
func flags(in *url.Values, s conversion.Scope, fields map[string]*bool) error {
	for name, field := range fields {
		if v, ok := (*in)[name]; ok {
			if err := runtime.Convert_Slice_string_To_bool(&v, field, s); err != nil {
				return err
			}
		}
	}
	return nil
}
