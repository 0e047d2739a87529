"""The artifact store on S3 (issue 17 item 3), against a real SeaweedFS started by the tests."""
