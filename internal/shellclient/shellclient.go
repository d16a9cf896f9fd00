// Package shellclient is a typed client of the shell.shelljob.dev API,
// built on client-go's generic typed clients (gentype), as a generated
// clientset is.
//
// It is for programs that start cold for every command, as the kubectl
// plugin does: controller-runtime's client registers every built-in kind
// of client-go into a scheme of its own when its package loads, which costs
// such a program more than a round trip to the API server.
package shellclient

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// ShellJobs reads and writes the ShellJobs of one namespace.
type ShellJobs = gentype.ClientWithList[*shellv1alpha1.ShellJob, *shellv1alpha1.ShellJobList]

// ShellPools reads and writes the ShellPools of one namespace.
type ShellPools = gentype.ClientWithList[*shellv1alpha1.ShellPool, *shellv1alpha1.ShellPoolList]

var (
	scheme         = runtime.NewScheme()
	codecs         = serializer.NewCodecFactory(scheme)
	parameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := shellv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// Client reaches the shell.shelljob.dev/v1alpha1 API.
type Client struct {
	rest rest.Interface
}

// NewForConfigAndClient returns a Client on config that sends its requests
// through httpClient.
func NewForConfigAndClient(config *rest.Config, httpClient *http.Client) (*Client, error) {
	c := rest.CopyConfig(config)
	c.GroupVersion = &shellv1alpha1.GroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	r, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, err
	}
	return &Client{rest: r}, nil
}

// ShellJobs returns the ShellJobs of namespace.
func (c *Client) ShellJobs(namespace string) *ShellJobs {
	return gentype.NewClientWithList[*shellv1alpha1.ShellJob, *shellv1alpha1.ShellJobList](
		"shelljobs", c.rest, parameterCodec, namespace,
		func() *shellv1alpha1.ShellJob { return &shellv1alpha1.ShellJob{} },
		func() *shellv1alpha1.ShellJobList { return &shellv1alpha1.ShellJobList{} })
}

// ShellPools returns the ShellPools of namespace.
func (c *Client) ShellPools(namespace string) *ShellPools {
	return gentype.NewClientWithList[*shellv1alpha1.ShellPool, *shellv1alpha1.ShellPoolList](
		"shellpools", c.rest, parameterCodec, namespace,
		func() *shellv1alpha1.ShellPool { return &shellv1alpha1.ShellPool{} },
		func() *shellv1alpha1.ShellPoolList { return &shellv1alpha1.ShellPoolList{} })
}
