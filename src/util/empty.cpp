// Placeholder so that an empty folder still forms a library.
