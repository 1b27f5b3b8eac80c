"""bodega.proxy"""
