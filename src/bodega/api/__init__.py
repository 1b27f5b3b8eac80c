"""bodega.api"""
