"""This project's providers; each is registered under the `keras_cloud_bench.providers` entry-point group."""
