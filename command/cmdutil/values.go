package cmdutil

// Small helpers on values that the commands and the views share.

// Ptr points to a copy of v, for the optional fields of the JSON views.
func Ptr[T any](v T) *T { return &v }
