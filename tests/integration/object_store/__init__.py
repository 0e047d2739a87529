"""The artifact store on S3, against a real SeaweedFS started by the tests."""
