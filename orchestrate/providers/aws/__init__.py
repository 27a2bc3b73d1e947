"""Amazon Web Services: EC2 machines (`compute`), S3 buckets (`storage`), EventBridge Scheduler (`scheduler`), and
the IAM policies they use (`iam`). Every boto3 call of the project is in this package."""

from orchestrate.providers.aws.compute import AWSProvider

__all__ = ["AWSProvider"]
