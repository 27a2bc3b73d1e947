"""Dataset files (download, cache, checksum), real loaders and labelled synthetic stand-ins."""
