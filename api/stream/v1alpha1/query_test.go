package v1alpha1_test

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
)

var codec = func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	if err := streamv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return runtime.NewParameterCodec(s)
}()

// TestQuery checks how a request's query decodes into the options, as the
// server reads it, and that what a client encodes decodes the same.
func TestQuery(t *testing.T) {
	cases := map[string]struct {
		query   string
		want    streamv1alpha1.ShellJobLogOptions
		wantErr bool
	}{
		"none":              {query: ""},
		"all":               {query: "offset=42&follow=true&framed=1&awaitStart=false&exit=true&deliver=1&text=rendered", want: streamv1alpha1.ShellJobLogOptions{Offset: 42, Follow: true, Framed: true, Exit: true, Deliver: true, Text: streamv1alpha1.TextRendered}},
		"a bare flag":       {query: "follow", want: streamv1alpha1.ShellJobLogOptions{Follow: true}},
		"false spelled 0":   {query: "follow=0&framed=false", want: streamv1alpha1.ShellJobLogOptions{}},
		"a bad offset":      {query: "offset=ten", wantErr: true},
		"a negative offset": {query: "offset=-1", want: streamv1alpha1.ShellJobLogOptions{Offset: -1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			var got streamv1alpha1.ShellJobLogOptions
			err = codec.DecodeParameters(q, streamv1alpha1.GroupVersion, &got)
			if (err != nil) != tc.wantErr {
				t.Fatalf("decode %q: %v", tc.query, err)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decode %q (-want +got):\n%s", tc.query, diff)
			}
			encoded, err := codec.EncodeParameters(&got, streamv1alpha1.GroupVersion)
			if err != nil {
				t.Fatal(err)
			}
			var again streamv1alpha1.ShellJobLogOptions
			if err := codec.DecodeParameters(encoded, streamv1alpha1.GroupVersion, &again); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("encoded as %q, decoded again (-first +again):\n%s", encoded.Encode(), diff)
			}
		})
	}
	var attach streamv1alpha1.ShellJobAttachOptions
	if err := codec.DecodeParameters(url.Values{"stdin": {"true"}, "tty": {"1"}}, streamv1alpha1.GroupVersion, &attach); err != nil {
		t.Fatal(err)
	}
	if want := (streamv1alpha1.ShellJobAttachOptions{Stdin: true, TTY: true}); attach != want {
		t.Errorf("attach options = %+v, want %+v", attach, want)
	}
	var files streamv1alpha1.ShellJobFilesOptions
	if err := codec.DecodeParameters(url.Values{"offset": {"1048576"}}, streamv1alpha1.GroupVersion, &files); err != nil || files.Offset != 1<<20 {
		t.Errorf("files options = %+v, %v; want offset 1048576", files, err)
	}
	if err := codec.DecodeParameters(url.Values{"offset": {"half"}}, streamv1alpha1.GroupVersion, &files); err == nil {
		t.Error("a files offset that is no number decoded")
	}
	encoded, err := codec.EncodeParameters(&streamv1alpha1.ShellJobFilesOptions{Offset: 42}, streamv1alpha1.GroupVersion)
	if err != nil || encoded.Get("offset") != "42" {
		t.Errorf("files options encoded as %q, %v", encoded.Encode(), err)
	}
}
