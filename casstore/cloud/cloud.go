// Package cloud imports every casstore adapter so that casstore.Open knows
// all of their schemes: s3 (casstore/s3), gs (casstore/gcs), azblob
// (casstore/azure), and the gocloud.dev/blob lifts blob+s3, blob+gs,
// blob+azblob, blob+file and blob+mem (casstore/blob), besides mem, which
// casstore itself registers. Import it for its side effect:
//
//	import _ "github.com/objwal/objwal/casstore/cloud"
package cloud

import (
	_ "github.com/objwal/objwal/casstore/azure" // azblob://
	_ "github.com/objwal/objwal/casstore/blob"  // blob+s3://, blob+gs://, blob+azblob://, blob+file://, blob+mem://
	_ "github.com/objwal/objwal/casstore/gcs"   // gs://
	_ "github.com/objwal/objwal/casstore/s3"    // s3://
)
